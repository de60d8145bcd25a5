"""The built-in task tools a model uses to plan with tasks (docs/tasks.md "Agents use
tasks"): a prompt that lists `tasks` among its tools is offered `create_task`,
`update_task`, `complete_task` and `delegate_task`, run by the `tool.call` activity
(`activities/task_tools.py`) through the same commands as `weft.Tasks`.

A model names its tasks (`name`), and a task's id is derived from the thread and the name:
a plan can name dependencies before they exist, and a retried call finds the task it made.
"""

from __future__ import annotations

import hashlib
from typing import Any

from weft.contract.definitions import ToolSpec

TASKS_TOOL = "tasks"
CREATE_TASK_TOOL = "create_task"
UPDATE_TASK_TOOL = "update_task"
COMPLETE_TASK_TOOL = "complete_task"
DELEGATE_TASK_TOOL = "delegate_task"
TASK_TOOL_NAMES = (CREATE_TASK_TOOL, UPDATE_TASK_TOOL, COMPLETE_TASK_TOOL, DELEGATE_TASK_TOOL)

_TASK_REF = {
    "type": "string",
    "description": "the task: its name in this thread, or its id (task-<12 hex>)",
}
_NAME = {
    "type": "string",
    "pattern": "^[A-Za-z0-9_.-]{1,64}$",
    "description": "a short name for the task, unique in this thread; other calls refer to it",
}
_SCHEMA = {
    "type": "object",
    "description": "a JSON Schema the task's answer must be JSON valid against",
}


def plan_task_id(thread_id: str, name: str) -> str:
    """The id of the task a thread's model named `name`: the same for every call."""
    return "task-" + hashlib.sha256(f"{thread_id}\n{name}".encode()).hexdigest()[:12]


def task_tool_specs() -> dict[str, ToolSpec]:
    """The task tools, by name, as the model sees them."""
    specs = [
        _spec(
            CREATE_TASK_TOOL,
            "Create a task: a unit of work another agent (or you, in a new thread) runs in "
            "the background, after the tasks it depends on complete. Returns its id.",
            {
                "name": _NAME,
                "objective": {"type": "string", "description": "what to do, in full"},
                "assignee": {
                    "type": "string",
                    "description": "the agent that runs it (default: you); one of your subagents",
                },
                "dependsOn": {
                    "type": "array",
                    "items": _TASK_REF,
                    "description": "tasks that must complete first (names or ids)",
                },
                "acceptanceSchema": _SCHEMA,
                "maxAttempts": {"type": "integer", "minimum": 1, "maximum": 100},
                "start": {
                    "type": "boolean",
                    "description": "false: it waits until delegated (default true: it starts)",
                },
            },
            ["name", "objective"],
        ),
        _spec(
            UPDATE_TASK_TOOL,
            "Change a task you created before its attempts start.",
            {
                "task": _TASK_REF,
                "objective": {"type": "string"},
                "maxAttempts": {"type": "integer", "minimum": 1, "maximum": 100},
                "acceptanceSchema": _SCHEMA,
                "reason": {"type": "string"},
            },
            ["task"],
        ),
        _spec(
            COMPLETE_TASK_TOOL,
            "Complete a task you created with its result (it must meet the task's schema, if "
            "it has one); a running attempt of it is stopped.",
            {
                "task": _TASK_REF,
                "response": {"type": "string", "description": "the result as text"},
                "structured": {"description": "the result as JSON"},
                "reason": {"type": "string"},
            },
            ["task"],
        ),
        _spec(
            DELEGATE_TASK_TOOL,
            "Delegate a task you created, before it runs, to one of your subagents, and start it.",
            {
                "task": _TASK_REF,
                "agent": {"type": "string", "description": "the subagent that runs it"},
                "reason": {"type": "string"},
            },
            ["task", "agent"],
        ),
    ]
    return {spec.name: spec for spec in specs}


def _spec(name: str, description: str, properties: dict[str, Any], required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
        builtin=True,
    )
