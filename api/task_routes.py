"""The task routes: create, list (`task_snapshot`), read, and every task command (start,
update, delegate, link, unlink, pause, resume, complete, fail, cancel, retry, progress), and
follow a task's own event log; the same checks and refusals as `weft.Tasks`
(docs/tasks.md): a refused input is 422 naming its field, a state that forbids the command
409, an unknown task 404."""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.responses import Response
from pydantic import Field
from temporalio.client import WorkflowExecutionStatus
from temporalio.service import RPCError

from weft.api.auth import principal
from weft.api.context import ApiContext, thread_status
from weft.api.deletion_routes import TASK_DELETION_ERRORS, Deleted, deleted
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
from weft.contract.tasks import (
    TaskAcceptance,
    TaskConstraints,
    TaskRecord,
    TaskSnapshot,
    TaskSpec,
    TaskStatus,
    task_snapshot,
)
from weft.contract.wire import CamelModel

_T = TypeVar("_T")

TaskId = Annotated[str, Path(pattern=ID_PATH_PATTERN, description="the task id")]


class CreateTask(TaskSpec):
    """`POST /tasks`: the task's spec, and its id when the caller picks one."""

    task_id: str | None = Field(default=None, description="task-<12 hex digits>; new when left out")


class TaskCommand(CamelModel):
    """`cancel` and `retry`: why, for the task's log."""

    reason: str | None = Field(default=None, max_length=20_000)


class TaskDecision(TaskCommand):
    """`start`, `pause`, `resume`, `fail`: who asks (recorded with the event) and why."""

    by: str | None = Field(default=None, max_length=255)


class UpdateTask(TaskDecision):
    """`update`: the parts that change, each replaced whole (before the attempts start)."""

    objective: str | None = None
    constraints: TaskConstraints | None = None
    acceptance: TaskAcceptance | None = None


class DelegateBody(TaskDecision):
    """`delegate`: the agent that runs the task's attempts from now on."""

    to: str = Field(description="the agent the task is delegated to")
    start: bool = Field(default=False, description="also start a task created not to start")


class LinkBody(TaskDecision):
    """`link` / `unlink`: the dependency edge added or removed."""

    depends_on: str = Field(description="the task this one depends on")


class CompleteBody(TaskDecision):
    """`complete`: an operator's output; `structured` must meet the acceptance schema."""

    response: str | None = None
    structured: Any = None


class ProgressBody(CamelModel):
    """`progress`: an entry of the task's progress."""

    message: str
    data: dict[str, Any] | None = None


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
    async def create_task(body: CreateTask, request: Idempotent, http: Request) -> Response:
        # A tenant's key creates its tenant's tasks; an admin's task is the body's
        # `scope.tenant`'s (or its thread's, or `default`'s).
        tenant = principal(http).confined_to
        return await request.run(lambda: _create(ctx, tasks, body, request, tenant))

    @routes.get(
        "/tasks",
        response_model=TaskSnapshot,
        responses=error_responses(422),
        summary="`task_snapshot`: tasks by where they stand, the graph, current attempts",
    )
    async def list_tasks(
        http: Request,
        status: Annotated[
            list[TaskStatus] | None, Query(description="only tasks in these statuses")
        ] = None,
        session: Annotated[str | None, Query(max_length=1000)] = None,
    ) -> TaskSnapshot:
        # Open tasks' runs closed through Temporal have their ends recorded first.
        records = await _answering(
            tasks.list_checked(
                statuses=status,
                session_id=session,
                tenant=principal(http).confined_to,  # a tenant's key lists its own only
                limit=500,
            )
        )
        return task_snapshot(records)

    @routes.get(
        "/tasks/{task_id}",
        response_model=TaskRecord,
        responses=error_responses(404, 422),
        summary="A task: its spec, status, attempts, progress and delivery",
    )
    async def read_task(task_id: TaskId) -> TaskRecord:
        return await _answering(tasks.show(task_id))

    @routes.delete(
        "/tasks/{task_id}",
        response_model=Deleted,
        response_model_by_alias=True,
        responses=error_responses(404, 409, 422, 503),
        summary="Delete a task: cancel it if open, then its rows, log and runs "
        "(`withThreads`: its attempts' threads too; 409 while others depend on it, unless "
        "`force`)",
    )
    async def delete_task(
        task_id: TaskId,
        force: Annotated[
            bool, Query(description="delete it though others depend on it: their edges go")
        ] = False,
        with_threads: Annotated[
            bool, Query(alias="withThreads", description="the threads its attempts ran too")
        ] = False,
    ) -> Deleted:
        return await deleted(
            tasks.delete(task_id, force=force, with_threads=with_threads, audit_as=None),
            TASK_DELETION_ERRORS,
            field="taskId",
        )

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

    def command(
        name: str,
        body_model: type[CamelModel],
        summary: str,
        run: Callable[[str, Any], Awaitable[object]],
        *,
        names: Callable[[Any], list[tuple[str, str]]] | None = None,
    ) -> None:
        """`POST /tasks/{id}/<name>`: run the command, answer with the task (202). `names`:
        the (field, task id) pairs of the body a tenant's key may name only its own of."""

        async def route(task_id: TaskId, request: Idempotent, body: Any, http: Request) -> Response:
            if names is not None:
                await _own_tasks(ctx, principal(http).confined_to, names(body))

            async def act() -> Reply:
                await _refusing(run(task_id, body))
                return Reply(202, await _get(tasks, task_id))

            return await request.run(act)

        route.__annotations__["body"] = Annotated[body_model, Body()]
        routes.post(
            f"/tasks/{{task_id}}/{name}",
            status_code=202,
            response_model=TaskRecord,
            responses=error_responses(*POST_ERRORS, 404, 503),
            summary=summary,
            name=f"{name}_task",
        )(route)

    command(
        "start",
        TaskDecision,
        "Start a task created with autoStart false (409 once started)",
        lambda t, b: tasks.start(t, by=b.by, reason=b.reason),
    )
    command(
        "update",
        UpdateTask,
        "Change the objective, constraints or acceptance before the attempts start (409 after)",
        lambda t, b: tasks.update(
            t,
            objective=b.objective,
            constraints=b.constraints,
            acceptance=b.acceptance,
            by=b.by,
            reason=b.reason,
        ),
    )
    command(
        "delegate",
        DelegateBody,
        "Delegate a task whose attempts have not started to another agent",
        lambda t, b: tasks.delegate(t, b.to, by=b.by, reason=b.reason, start=b.start),
    )
    command(
        "link",
        LinkBody,
        "Add a dependency (a cycle is 422 naming it; 409 once the attempts started)",
        lambda t, b: tasks.link(t, b.depends_on, by=b.by, reason=b.reason),
        names=lambda b: [("dependsOn", b.depends_on)],
    )
    command(
        "unlink",
        LinkBody,
        "Remove a dependency (422 when there is no such edge)",
        lambda t, b: tasks.unlink(t, b.depends_on, by=b.by, reason=b.reason),
    )
    command(
        "pause",
        TaskDecision,
        "Pause a task: no new attempt starts; a running one runs to its end",
        lambda t, b: tasks.pause(t, by=b.by, reason=b.reason),
    )
    command(
        "resume",
        TaskDecision,
        "Resume a paused task (409 when it is not paused)",
        lambda t, b: tasks.resume(t, by=b.by, reason=b.reason),
    )
    command(
        "complete",
        CompleteBody,
        "Complete an unfinished task with an operator's output (checked against its schema)",
        lambda t, b: tasks.complete(
            t, response=b.response, structured=b.structured, by=b.by, reason=b.reason
        ),
    )
    command(
        "fail",
        TaskDecision,
        "Fail an unfinished task, recording who and why",
        lambda t, b: tasks.fail(t, by=b.by, reason=b.reason),
    )
    command(
        "progress",
        ProgressBody,
        "Add a progress entry to an unfinished task",
        lambda t, b: tasks.append_progress(t, b.message, b.data),
    )

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
        await _answering(tasks.show(task_id))  # a run closed through Temporal: its end too
        closed = await _run_closed(ctx, task_id)
        return await events_reply(
            ctx, request, task_id, after, wait, limit, last_event_id, closed=closed
        )

    return routes


async def _create(
    ctx: ApiContext,
    tasks: Tasks,
    body: CreateTask,
    request: IdempotentRequest,
    tenant: str | None,
) -> Reply:
    # The key names the task, so a retry after a crash between starting and recording
    # finds the task it made instead of making a second one.
    task_id = body.task_id or _task_id_of_key(request)
    if task_id is not None and body.task_id is None:
        made = await asyncio.to_thread(ctx.store.tasks.get, task_id)
        if made is not None:
            return Reply(201, made)
    if tenant is not None and body.scope.thread_id is not None:
        if await asyncio.to_thread(ctx.store.threads.tenant, body.scope.thread_id) != tenant:
            # Worded as for a thread that does not exist: another tenant's never shows.
            message = f"scope.threadId: no thread {body.scope.thread_id!r}"
            raise GatewayError(422, message, fields=["scope.threadId"])
    parent = body.scope.parent_task_id
    named = [("dependencies", d) for d in body.dependencies]
    await _own_tasks(ctx, tenant, [*named, *([("scope.parentTaskId", parent)] if parent else [])])
    try:
        record = await tasks.create(
            body.objective,
            body.assignee,
            task_id=task_id,
            dependencies=body.dependencies,
            acceptance_schema=body.acceptance.schema_,
            scope=body.scope,
            constraints=body.constraints,
            auto_start=body.auto_start,
            tenant=tenant,
            run_in=body.run_in,
        )
    except TaskError as err:
        # Only a failed start carries its cause; every refusal of the input is `from None`.
        if err.__cause__ is not None:
            raise GatewayError(503, str(err)) from None
        raise GatewayError(422, str(err), fields=[err.field or "body"]) from None
    return Reply(201, record)


async def _own_tasks(ctx: ApiContext, tenant: str | None, named: list[tuple[str, str]]) -> None:
    """422 naming the field unless each task a tenant's key names in a body (a dependency,
    a parent) is its tenant's: another tenant's is refused in the very words a task that
    does not exist is, so a body never tells a key whether another tenant's task exists
    (nor ties its work to it). Hence a tenant's plan is created dependencies first."""
    if tenant is None:
        return
    for field, task_id in named:
        if await asyncio.to_thread(ctx.store.tasks.tenant, task_id) != tenant:
            raise GatewayError(422, f"{field}: no task {task_id!r}", fields=[field])


def _task_id_of_key(request: IdempotentRequest) -> str | None:
    derived = request.derived_id("task")
    return None if derived is None else derived[: len("task-") + 12]


async def _get(tasks: Tasks, task_id: str) -> TaskRecord:
    try:
        return await asyncio.to_thread(tasks.get, task_id)
    except TaskNotFound as err:
        raise GatewayError(404, str(err)) from None


async def _answering(read: Awaitable[_T]) -> _T:
    """A read that may record an end Temporal states (`show`, `list_checked`): an unknown
    task is 404."""
    try:
        return await read
    except TaskNotFound as err:
        raise GatewayError(404, str(err)) from None


async def _refusing(command: Awaitable[object]) -> None:
    """Run a command: an unknown task is 404, a refused input 422 naming its field, a
    state that forbids the command 409."""
    try:
        await command
    except TaskNotFound as err:
        raise GatewayError(404, str(err)) from None
    except TaskError as err:
        if err.field is not None:
            raise GatewayError(422, str(err), fields=[err.field]) from None
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


__all__ = [
    "CompleteBody",
    "CreateTask",
    "DelegateBody",
    "LinkBody",
    "ProgressBody",
    "TaskCommand",
    "TaskDecision",
    "UpdateTask",
    "router",
]
