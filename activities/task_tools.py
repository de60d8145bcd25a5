"""The task tools a model calls (`contract/task_tools.py`), as a tool source of the worker's
Env: `create_task`, `update_task`, `complete_task`, `delegate_task`, run through the same
commands as `weft.Tasks` (`activities/task_commands.py`), so every fact is the task's own
event, and every refusal reaches the model as a tool error naming what is wrong.

A thread acts on the tasks it created (their `scope.threadId`), names them (the id is
derived from the thread and the name, so a retried call finds the task it made), and
assigns or delegates them only to its own agent or an agent its definitions list (its
subagents and handoff targets). `by` in the tasks' events is the calling thread's id.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from weft.activities.env import Dispatched, ToolDispatch
from weft.activities.task_commands import TaskCommands
from weft.activities.tool_execute import error_result
from weft.contract.activities import ToolResult
from weft.contract.task_tools import (
    COMPLETE_TASK_TOOL,
    CREATE_TASK_TOOL,
    TASK_TOOL_NAMES,
    UPDATE_TASK_TOOL,
    plan_task_id,
)
from weft.contract.tasks import TASK_ID_PATTERN, TaskError, TaskRecord
from weft.contract.validation import describe_validation_error


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class CreateArgs(_Args):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    objective: str = Field(min_length=1)
    assignee: str | None = None
    depends_on: list[str] = Field(default_factory=list, alias="dependsOn")
    acceptance_schema: dict[str, Any] | None = Field(default=None, alias="acceptanceSchema")
    max_attempts: int | None = Field(default=None, alias="maxAttempts")
    start: bool = True


class UpdateArgs(_Args):
    task: str
    objective: str | None = None
    max_attempts: int | None = Field(default=None, alias="maxAttempts")
    acceptance_schema: dict[str, Any] | None = Field(default=None, alias="acceptanceSchema")
    reason: str | None = None


class CompleteArgs(_Args):
    task: str
    response: str | None = None
    structured: Any = None
    reason: str | None = None


class DelegateArgs(_Args):
    task: str
    agent: str
    reason: str | None = None


_A = TypeVar("_A", bound=_Args)


class TaskTools:
    """Claims the task tools' calls when the snapshot offers them as built-ins."""

    def __init__(self, commands: TaskCommands) -> None:
        self._tasks = commands

    async def dispatch(self, request: ToolDispatch) -> Dispatched | None:
        name = request.name
        spec = request.snapshot.tools.get(name)
        if name not in TASK_TOOL_NAMES or spec is None or not spec.builtin:
            return None  # not offered, or a function tool of the same name
        try:
            raw = json.loads(request.call.tool_call.function.arguments or "{}")
            result = await self._run(request, name, raw)
        except ValueError as err:  # bad JSON, bad arguments, a refused command
            field = getattr(err, "field", None)
            where = f" ({field})" if field else ""
            return Dispatched(error_result("task_refused", f"{name}{where}: {err}"))
        return Dispatched(ToolResult(status="success", result=result))

    async def _run(self, request: ToolDispatch, name: str, raw: Any) -> dict[str, Any]:
        thread = request.call.thread_id
        if name == CREATE_TASK_TOOL:
            return await self._create(request, _args(CreateArgs, raw))
        if name == UPDATE_TASK_TOOL:
            update = _args(UpdateArgs, raw)
            record = await self._own(thread, update.task)
            constraints = None
            if update.max_attempts is not None:
                constraints = record.constraints.model_copy(
                    update={"max_attempts": update.max_attempts}
                )
            acceptance = (
                {"schema": update.acceptance_schema}
                if update.acceptance_schema is not None
                else None
            )
            record = await self._tasks.update(
                record.task_id,
                objective=update.objective,
                constraints=constraints,
                acceptance=acceptance,
                by=thread,
                reason=update.reason,
            )
            return _answer(record)
        if name == COMPLETE_TASK_TOOL:
            complete = _args(CompleteArgs, raw)
            record = await self._own(thread, complete.task)
            if record.status == "completed" and record.ended_by == thread:
                return _answer(record)  # this call, retried after it completed the task
            record = await self._tasks.complete(
                record.task_id,
                response=complete.response,
                structured=complete.structured,
                by=thread,
                reason=complete.reason,
            )
            return _answer(record)
        delegate = _args(DelegateArgs, raw)
        record = await self._own(thread, delegate.task)
        agent = _agent(request, delegate.agent)
        if record.delegated_to == agent and record.status != "accepted":
            return _answer(record)  # this call, retried after it delegated and started it
        record = await self._tasks.delegate(
            record.task_id, agent, by=thread, reason=delegate.reason, start=True
        )
        return _answer(record)

    async def _create(self, request: ToolDispatch, args: CreateArgs) -> dict[str, Any]:
        thread = request.call.thread_id
        task_id = plan_task_id(thread, args.name)
        known = await asyncio.to_thread(self._tasks.find, task_id)
        if known is not None:  # this call, retried, or the name used before
            if known.objective != args.objective:
                raise TaskError(f"this thread has a task named {args.name!r} already", field="name")
            return _answer(known, args.name)
        constraints = {"maxAttempts": args.max_attempts} if args.max_attempts else {}
        caller = request.snapshot.agent_def(request.call.agent).name
        record = await self._tasks.create(
            args.objective,
            _agent(request, args.assignee) if args.assignee else caller,
            task_id=task_id,
            dependencies=[_task_id(thread, d) for d in args.depends_on],
            acceptance_schema=args.acceptance_schema,
            scope={"sessionId": request.call.session_id, "threadId": thread},
            constraints=constraints,
            auto_start=args.start,
        )
        return _answer(record, args.name)

    async def _own(self, thread_id: str, ref: str) -> TaskRecord:
        """The task `ref` names, if this thread created it (read off the event loop)."""
        record = await asyncio.to_thread(self._tasks.get, _task_id(thread_id, ref))
        if record.scope.thread_id != thread_id:
            raise TaskError(f"task {record.task_id} was not created by this thread", field="task")
        return record


def _args(model: type[_A], raw: Any) -> _A:
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        raise TaskError(describe_validation_error(err)) from None


def _task_id(thread_id: str, ref: str) -> str:
    """A task id as given, or the id of the task this thread named `ref`."""
    return ref if TASK_ID_PATTERN.match(ref) else plan_task_id(thread_id, ref)


def _agent(request: ToolDispatch, name: str) -> str:
    """`name` if the calling thread may hand work to it: its own agent, or an agent its
    definitions list (a subagent or handoff target)."""
    allowed = [request.snapshot.agent.name, *request.snapshot.agents]
    if name not in allowed:
        raise TaskError(
            f"agent {name!r} is not one of this agent's subagents ({', '.join(allowed)})",
            field="agent",
        )
    return name


def _answer(record: TaskRecord, name: str | None = None) -> dict[str, Any]:
    """What the model is told: the task's id, name, status and assignee."""
    answer = {"taskId": record.task_id, "status": record.status, "assignee": record.assignee}
    if record.dependencies:
        answer["dependsOn"] = ", ".join(record.dependencies)
    return {"name": name, **answer} if name else answer
