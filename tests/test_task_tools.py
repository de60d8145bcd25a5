"""Agents use tasks: a prompt that lists `tasks` is offered the task tools, and the
scripted model plans with them: two dependent tasks, one delegated to a subagent, a third
completed by the model; all of it in `task_snapshot`, every fact a validated event."""

from __future__ import annotations

import asyncio
import json

import pytest
from planner_agents import planner_definitions
from support import (
    add_script,
    content_of,
    event_schema_validator,
    idle_after,
    start_thread,
    store_of,
    wait_until,
)

from weft.client.tasks import Tasks
from weft.contract.task_tools import TASK_TOOL_NAMES, plan_task_id
from weft.contract.tool_catalog import offered_tools
from weft.definitions import (
    DefinitionError,
    Definitions,
    define_agent,
    define_model,
    define_prompt,
)

PLAN = [
    {
        "tool_calls": [
            {
                "name": "create_task",
                "arguments": {
                    "name": "research",
                    "objective": "Research the topic.",
                    "start": False,
                },
            },
            {
                "name": "create_task",
                "arguments": {
                    "name": "write",
                    "objective": "Write the report.",
                    "dependsOn": ["research"],
                },
            },
            {
                "name": "create_task",
                "arguments": {"name": "notes", "objective": "Take notes.", "start": False},
            },
        ],
        "expect": {"tools_include": list(TASK_TOOL_NAMES)},
    },
    {
        "tool_calls": [
            {
                "name": "update_task",
                "arguments": {"task": "write", "objective": "Write the report briefly."},
            },
            {"name": "delegate_task", "arguments": {"task": "research", "agent": "writer"}},
            {
                "name": "complete_task",
                "arguments": {"task": "notes", "response": "No notes needed."},
            },
        ],
    },
    {"text": "Plan made."},
]
SCRIPT = {
    "turns": [
        {"match": "Plan the report", "replies": PLAN},
        {
            "match": "Delegate badly",
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "delegate_task",
                            "arguments": {"task": "write", "agent": "nobody"},
                        }
                    ]
                },
                {"text": "I could not."},
            ],
        },
        {"match": "Research the topic", "replies": [{"text": "Findings."}]},
        {"match": "Write the report", "replies": [{"text": "Report."}]},
    ]
}


async def test_model_plans_with_tasks(start_worker, temporal_client, scripted_server):
    worker = await start_worker(planner_definitions(add_script(scripted_server, SCRIPT)))
    store = store_of(worker)
    tasks = Tasks(temporal_client, store, task_queue=worker.task_queue)
    thread = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="planner",
        messages=[{"role": "user", "content": "Plan the report."}],
    )
    await wait_until(thread, idle_after(1), timeout=60)
    research, write, notes = (plan_task_id(thread.id, n) for n in ("research", "write", "notes"))

    written = await asyncio.wait_for(tasks.wait(write), timeout=60)
    researched = tasks.get(research)
    assert researched.status == written.status == "completed"
    assert researched.assignee == researched.delegated_to == "writer"
    assert researched.scope.thread_id == written.scope.thread_id == thread.id
    attempt_thread = store.threads.get(researched.attempts[0].thread_id)
    assert attempt_thread is not None and attempt_thread.agent == "writer"
    assert written.objective == "Write the report briefly." and written.assignee == "planner"
    assert written.dependencies == [research]
    assert written.output is not None and written.output.response == "Report."
    assert written.attempts[0].started_at >= (researched.attempts[0].ended_at or "")
    noted = tasks.get(notes)
    assert noted.status == "completed" and noted.ended_by == thread.id and noted.attempts == []
    assert noted.output is not None and noted.output.response == "No notes needed."

    snapshot = tasks.snapshot()
    assert (write, research) in [(e.task_id, e.depends_on) for e in snapshot.graph]
    assert {research, write, notes} <= {t.task_id for t in snapshot.recent_terminal}
    assert snapshot.delivery[write].state == "stored"
    validator = event_schema_validator()
    for task_id in (research, write, notes):
        for event in tasks.events(task_id):
            validator.validate(event.to_wire())
    [delegated] = [e for e in tasks.events(research) if e.type == "task.delegated"]
    assert delegated.payload == {"to": "writer", "from": "planner", "by": thread.id}
    [updated] = [e for e in tasks.events(write) if e.type == "task.updated"]
    assert updated.payload == {
        "changes": {"objective": "Write the report briefly."},
        "by": thread.id,
    }

    # A refused call is a tool error the model reads, naming what is wrong.
    await thread.execute_update(
        "submit_turn", {"role": "user", "content": "Delegate badly.", "wait": "completed"}
    )
    results = [m for m in store.messages.list(thread.id) if m.role == "tool"]
    refusal = json.loads(content_of(results[-1]))
    assert "not one of this agent's subagents" in json.dumps(refusal), refusal
    assert "nobody" in json.dumps(refusal)


def test_tasks_in_a_prompt_offers_the_task_tools():
    """`tasks` in a prompt's tools puts the four task tools in the snapshot, as built-ins
    the model is offered; a stray field on its entry is refused naming it; the tools are
    not offered to a prompt that does not list `tasks`."""
    definitions = planner_definitions("any")
    definitions.validate(providers=["scripted"])
    snapshot = definitions.snapshot("planner")
    assert set(TASK_TOOL_NAMES) <= set(snapshot.tools)
    assert all(snapshot.tools[n].builtin for n in TASK_TOOL_NAMES)
    offered = offered_tools(snapshot, snapshot.prompts["planner_prompt"], [], {})
    assert offered[: len(TASK_TOOL_NAMES)] == list(TASK_TOOL_NAMES)
    assert not set(TASK_TOOL_NAMES) & set(definitions.snapshot("writer").tools)

    stray = Definitions().add(
        define_model(name="scripted", provider="scripted", model="any"),
        define_prompt(
            name="p",
            toolDescription="d",
            model="scripted",
            prompt="hi",
            tools=[{"name": "tasks", "options": {"x": 1}}],
        ),
        define_agent(name="a", sideA={"prompt": "p"}),
    )
    with pytest.raises(DefinitionError, match=r"tools\[0\]\.options"):
        stray.validate(providers=["scripted"])
