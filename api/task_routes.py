"""The task routes: create, list (`task_snapshot`), read, cancel and retry tasks, and follow a
task's own event log; the same checks and refusals as `weft.Tasks` (docs/tasks.md)."""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

import asyncio
from collections.abc import Awaitable
from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.responses import Response
from pydantic import Field
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from weft.api.context import ApiContext, thread_status
from weft.api.event_routes import (
    SSE_DESCRIPTION,
    AfterParam,
    EventPage,
    LastEventIdParam,
    LimitParam,
    WaitParam,
    events_reply,
)
from weft.api.gateway.app import GatewayError
from weft.api.idempotency import IdempotentRequest, Reply, idempotency
from weft.api.models import POST_ERRORS, error_responses
from weft.api.thread_routes import ID_PATH_PATTERN
from weft.client.tasks import TaskError, TaskNotFound, Tasks
from weft.contract.tasks import TaskRecord, TaskSnapshot, TaskSpec, TaskStatus, task_snapshot
from weft.contract.wire import CamelModel

TaskId = Annotated[str, Path(pattern=ID_PATH_PATTERN, description="the task id")]


class CreateTask(TaskSpec):
    """`POST /tasks`: the task's spec, and its id when the caller picks one."""

    task_id: str | None = Field(default=None, description="task-<12 hex digits>; new when left out")


class TaskCommand(CamelModel):
    """`cancel` and `retry`: why, for the task's log."""

    reason: str | None = Field(default=None, max_length=20_000)


def router(ctx: ApiContext) -> APIRouter:
    """The task routes over `ctx`; tasks start on `ctx.task_queue`."""
    routes = APIRouter(tags=["tasks"])
    tasks = Tasks(ctx.client, ctx.store, task_queue=ctx.task_queue)
    Idempotent = Annotated[IdempotentRequest, Depends(idempotency(ctx.store))]

    @routes.post(
        "/tasks",
        status_code=201,
        response_model=TaskRecord,
        responses=error_responses(*POST_ERRORS, 503),
        summary="Create a task and start it (an unknown assignee fails its attempt, naming it)",
    )
    async def create_task(body: CreateTask, request: Idempotent) -> Response:
        return await request.run(lambda: _create(ctx, tasks, body, request))

    @routes.get(
        "/tasks",
        response_model=TaskSnapshot,
        responses=error_responses(422),
        summary="`task_snapshot`: tasks by where they stand, the graph, current attempts",
    )
    async def list_tasks(
        status: Annotated[
            list[TaskStatus] | None, Query(description="only tasks in these statuses")
        ] = None,
        session: Annotated[str | None, Query(max_length=1000)] = None,
    ) -> TaskSnapshot:
        records = await asyncio.to_thread(
            tasks.list, statuses=status, session_id=session, limit=500
        )
        return task_snapshot(records)

    @routes.get(
        "/tasks/{task_id}",
        response_model=TaskRecord,
        responses=error_responses(404, 422),
        summary="A task: its spec, status, attempts, progress and delivery",
    )
    async def read_task(task_id: TaskId) -> TaskRecord:
        return await _get(tasks, task_id)

    @routes.post(
        "/tasks/{task_id}/cancel",
        status_code=202,
        response_model=TaskRecord,
        responses=error_responses(*POST_ERRORS, 404, 503),
        summary="Ask an unfinished task to stop; it ends `cancelled` (409 once it has ended)",
    )
    async def cancel_task(
        task_id: TaskId, request: Idempotent, body: Annotated[TaskCommand | None, Body()] = None
    ) -> Response:
        async def act() -> Reply:
            await _refusing(tasks.cancel(task_id, (body or TaskCommand()).reason))
            return Reply(202, await _get(tasks, task_id))

        return await request.run(act)

    @routes.post(
        "/tasks/{task_id}/retry",
        status_code=202,
        response_model=TaskRecord,
        responses=error_responses(*POST_ERRORS, 404, 503),
        summary="Run a failed, timed out or cancelled task again (409 for any other)",
    )
    async def retry_task(
        task_id: TaskId, request: Idempotent, body: Annotated[TaskCommand | None, Body()] = None
    ) -> Response:
        async def act() -> Reply:
            await _refusing(tasks.retry(task_id, (body or TaskCommand()).reason))
            return Reply(202, await _get(tasks, task_id))

        return await request.run(act)

    @routes.get(
        "/tasks/{task_id}/events",
        response_model=EventPage,
        responses={
            200: {
                "description": SSE_DESCRIPTION.replace("the thread has", "the task's run has"),
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            **error_responses(404, 422, 503),
        },
        summary="A task's events: Server-Sent Events, or a long poll as JSON",
    )
    async def task_events(
        request: Request,
        task_id: TaskId,
        after: AfterParam = 0,
        wait: WaitParam = 0,
        limit: LimitParam = 100,
        last_event_id: LastEventIdParam = None,
    ) -> Response:
        await _get(tasks, task_id)
        closed = await _run_closed(ctx, task_id)
        return await events_reply(
            ctx, request, task_id, after, wait, limit, last_event_id, closed=closed
        )

    return routes


async def _create(
    ctx: ApiContext, tasks: Tasks, body: CreateTask, request: IdempotentRequest
) -> Reply:
    # The key names the task, so a retry after a crash between starting and recording
    # finds the task it made instead of making a second one.
    task_id = body.task_id or _task_id_of_key(request)
    if task_id is not None and body.task_id is None:
        made = await asyncio.to_thread(ctx.store.tasks.get, task_id)
        if made is not None:
            return Reply(201, made)
    try:
        record = await tasks.create(
            body.objective,
            body.assignee,
            task_id=task_id,
            dependencies=body.dependencies,
            acceptance_schema=body.acceptance.schema_,
            scope=body.scope,
            constraints=body.constraints,
        )
    except TaskError as err:
        # Only a failed start carries its cause; every refusal of the input is `from None`.
        if err.__cause__ is not None:
            raise GatewayError(503, str(err)) from None
        raise GatewayError(422, str(err), fields=[_field_of(str(err))]) from None
    return Reply(201, record)


def _task_id_of_key(request: IdempotentRequest) -> str | None:
    derived = request.derived_id("task")
    return None if derived is None else derived[: len("task-") + 12]


def _field_of(message: str) -> str:
    """The body field a `TaskError` from `create` is about (its messages name it first)."""
    for prefix, field in (
        ("acceptance.schema", "acceptance.schema"),
        ("dependency cycle", "dependencies"),
        ("taskId", "taskId"),
        ("task task-", "taskId"),
    ):
        if message.startswith(prefix):
            return field
    return "body"


async def _get(tasks: Tasks, task_id: str) -> TaskRecord:
    try:
        return await asyncio.to_thread(tasks.get, task_id)
    except TaskNotFound as err:
        raise GatewayError(404, str(err)) from None


async def _refusing(command: Awaitable[object]) -> None:
    """Run a cancel or retry: an unknown task is 404, a state that forbids it 409."""
    try:
        await command
    except TaskNotFound as err:
        raise GatewayError(404, str(err)) from None
    except TaskError as err:
        raise GatewayError(409, str(err)) from None
    except RPCError as err:
        raise GatewayError(503, f"Temporal did not answer ({err.message}); retry") from None


async def _run_closed(ctx: ApiContext, task_id: str) -> bool:
    """Whether the task's current run has ended; a task whose run never started (its
    `task.failed` says why) has nothing more to write."""
    try:
        return await thread_status(ctx, task_id) != WorkflowExecutionStatus.RUNNING
    except GatewayError as err:
        if err.status == 404:
            return True
        raise


__all__ = ["CreateTask", "TaskCommand", "router"]
