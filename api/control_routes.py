"""Steering a running thread over HTTP: queue a message, submit a turn (and wait for it),
answer a pending action, edit the queue, refresh its MCP tools, terminate. Every route is a
POST, idempotent with an `Idempotency-Key` (api/idempotency.py); each answers 404 for an
unknown thread and 409 for a closed one before it acts (docs/http-api.md)."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations of the
# routes, and those name dependencies built inside `router` (a closure, not a global).

import asyncio
from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path
from fastapi.responses import Response
from pydantic import ValidationError
from temporalio.client import (
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from weft.activities.spill import spill_queued_content
from weft.api.context import ApiContext, require_running
from weft.api.idempotency import IdempotentRequest, Reply, idempotency
from weft.api.models import (
    POST_ERRORS,
    ActionAnswer,
    MessageInput,
    QueueEditRequested,
    RefreshToolsInput,
    TerminateInput,
    TerminateRequested,
    ToolsRefreshRequested,
    TurnInput,
    TurnWaiting,
    error_responses,
)
from weft.api.thread_routes import ID_PATH_PATTERN, ThreadId
from weft.client.actions import response
from weft.client.ask import TurnWaitTimeout, ask_thread
from weft.client.liveness import QUERY_TIMEOUT, UNANSWERED
from weft.contract.actions import UPDATE_RESPOND_ACTION_CHECKED, RespondActionResult
from weft.contract.budget import UPDATE_SET_BUDGET, BudgetState, SetBudget
from weft.contract.mcp import SIGNAL_REFRESH_TOOLS, RefreshTools
from weft.contract.messages import (
    QueuedMessage,
    QueuedTurnRef,
    SubmitTurnRequest,
    SubmitTurnResult,
    TerminateRequest,
)
from weft.contract.thread import (
    QUERY_THREAD_READ,
    SIGNAL_PROMOTE_QUEUED_TURN,
    SIGNAL_REMOVE_QUEUED_TURN,
    SIGNAL_TERMINATE,
    UPDATE_SUBMIT_TURN,
    ThreadRead,
)
from weft.contract.turns import TurnResult
from weft.contract.validation import describe_validation_error
from weft.workers.gateway.app import GatewayError

# How long an update may wait to be accepted: a thread no worker runs never accepts it.
UPDATE_TIMEOUT = timedelta(seconds=30)
# `wait: completed` without a timeout.
DEFAULT_TURN_WAIT_SECONDS = 60.0

# Every control route: the thread is unknown (404), closed (409), or Temporal or the
# thread's worker does not answer (503).
_CONTROL_ERRORS = (*POST_ERRORS, 404, 503)


def router(ctx: ApiContext) -> APIRouter:
    """The control routes over `ctx`."""
    routes = APIRouter(tags=["control"])
    Idempotent = Annotated[IdempotentRequest, Depends(idempotency(ctx.store))]

    @routes.post(
        "/threads/{thread_id}/messages",
        status_code=202,
        response_model=SubmitTurnResult,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="Queue a message (submit_turn, enqueue): it starts a turn or waits its turn",
    )
    async def queue_message(
        thread_id: ThreadId, body: MessageInput, request: Idempotent
    ) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            message = await _queued(ctx, body)
            result = await _submit(
                ctx, thread_id, message, "enqueue", request.derived_id("message")
            )
            return Reply(202, result)

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/turns",
        status_code=202,
        response_model=SubmitTurnResult | TurnWaiting,
        responses={
            200: {"model": TurnResult, "description": "wait=completed: how the turn ended"},
            **error_responses(*_CONTROL_ERRORS),
        },
        summary="Submit a turn with a policy; wait until it is queued, or until it ends",
    )
    async def submit_turn(thread_id: ThreadId, body: TurnInput, request: Idempotent) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            message = await _queued(ctx, body)
            update_id = request.derived_id("turn")
            if body.wait == "accepted":
                result = await _submit(ctx, thread_id, message, body.policy, update_id)
                return Reply(202, result)
            timeout = body.timeout_seconds or DEFAULT_TURN_WAIT_SECONDS
            return await _ask(ctx, thread_id, message, body.policy, update_id, timeout)

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/actions/{action_id}",
        response_model=RespondActionResult,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="Answer a pending action: approve or deny a tool, answer a question or an MCP "
        "elicitation",
    )
    async def answer_action(
        thread_id: ThreadId,
        action_id: Annotated[str, Path(min_length=1, max_length=256, pattern=ID_PATH_PATTERN)],
        body: ActionAnswer,
        request: Idempotent,
    ) -> Response:
        async def act() -> Reply:
            _check_answer(body)
            await require_running(ctx, thread_id)
            answer = response(
                action_id, body.decision, answer=body.answer, scope=body.scope, reason=body.reason
            )
            result = await _update(
                ctx,
                thread_id,
                UPDATE_RESPOND_ACTION_CHECKED,
                answer,
                request.derived_id("action"),
                RespondActionResult,
            )
            return Reply(200, RespondActionResult.model_validate(result))

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/budget",
        response_model=BudgetState,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="Set the budget of a thread's tree (its root only); a raise resumes a turn "
        "the spent budget stopped",
    )
    async def set_budget(thread_id: ThreadId, body: SetBudget, request: Idempotent) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            result = await _update(
                ctx,
                thread_id,
                UPDATE_SET_BUDGET,
                body.model_dump(mode="json", by_alias=True, exclude_none=True),
                request.derived_id("budget"),
                BudgetState,
            )
            return Reply(200, BudgetState.model_validate(result))

        return await request.run(act)

    _add_queue_route(routes, ctx, "remove")
    _add_queue_route(routes, ctx, "promote")

    @routes.post(
        "/threads/{thread_id}/tools/refresh",
        status_code=202,
        response_model=ToolsRefreshRequested,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="List the thread's MCP servers' tools again (all, or the servers named) "
        "before its next model call",
    )
    async def refresh_tools(
        thread_id: ThreadId, request: Idempotent, body: RefreshToolsInput | None = None
    ) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            servers = body.servers if body else None
            payload = RefreshTools(servers=servers).model_dump(by_alias=True)
            await _signal(ctx, thread_id, SIGNAL_REFRESH_TOOLS, payload)
            return Reply(202, ToolsRefreshRequested(thread_id=thread_id, refresh_requested=servers))

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/terminate",
        status_code=202,
        response_model=TerminateRequested,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="Terminate the thread: it ends what it must and closes",
    )
    async def terminate(
        thread_id: ThreadId, request: Idempotent, body: TerminateInput | None = None
    ) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            payload = TerminateRequest(reason=body.reason if body else None)
            await _signal(ctx, thread_id, SIGNAL_TERMINATE, payload.model_dump(by_alias=True))
            return Reply(202, TerminateRequested(thread_id=thread_id))

        return await request.run(act)

    return routes


def _add_queue_route(
    routes: APIRouter, ctx: ApiContext, action: Literal["remove", "promote"]
) -> None:
    Idempotent = Annotated[IdempotentRequest, Depends(idempotency(ctx.store))]
    signal = SIGNAL_REMOVE_QUEUED_TURN if action == "remove" else SIGNAL_PROMOTE_QUEUED_TURN
    summary = (
        "Remove a queued message from the thread's queue"
        if action == "remove"
        else "Move a queued message to the front of the thread's queue"
    )

    @routes.post(
        f"/threads/{{thread_id}}/queue/{{queue_id}}/{action}",
        status_code=202,
        response_model=QueueEditRequested,
        responses=error_responses(*_CONTROL_ERRORS),
        summary=summary,
        name=f"{action}_queued_turn",
    )
    async def edit_queue(
        thread_id: ThreadId,
        queue_id: Annotated[str, Path(min_length=1, max_length=256, pattern=ID_PATH_PATTERN)],
        request: Idempotent,
    ) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            read = await _live_read(ctx, thread_id)
            if queue_id not in {item.queue_id for item in read.queue}:
                raise GatewayError(404, f"thread {thread_id!r} has no queued turn {queue_id!r}")
            ref = QueuedTurnRef(queue_id=queue_id).model_dump(by_alias=True)
            await _signal(ctx, thread_id, signal, ref)
            return Reply(
                202, QueueEditRequested(thread_id=thread_id, queue_id=queue_id, action=action)
            )

        return await request.run(act)


# -- the message ---------------------------------------------------------------------------


async def _queued(ctx: ApiContext, body: MessageInput) -> QueuedMessage:
    """The message to send: content over 64 KiB goes to the store as a blob first, and the
    message carries a preview and `metadata.contentRef` (as `Threads` does)."""
    content, ref = await asyncio.to_thread(spill_queued_content, ctx.store, body.content)
    try:
        return QueuedMessage(
            role=body.role,
            content=content,
            attachments=body.attachments,
            silent=body.silent,
            metadata={**body.metadata, **ref},
        )
    except ValidationError as err:
        raise GatewayError(422, describe_validation_error(err)) from None


def _check_answer(body: ActionAnswer) -> None:
    """The consistency rules of `ActionResponse`, each naming its field."""
    if body.decision == "answer" and body.answer is None:
        raise GatewayError(422, "answer: decision 'answer' needs an answer", fields=["answer"])
    if body.decision != "answer" and body.answer is not None:
        raise GatewayError(
            422, f"answer: decision {body.decision!r} takes no answer", fields=["answer"]
        )
    if body.scope == "session" and body.decision != "approve":
        raise GatewayError(
            422, "scope: 'session' only applies to decision 'approve'", fields=["scope"]
        )


# -- Temporal ------------------------------------------------------------------------------


async def _submit(
    ctx: ApiContext,
    thread_id: str,
    message: QueuedMessage,
    policy: Literal["enqueue", "interrupt", "reject"],
    update_id: str | None,
) -> SubmitTurnResult:
    """`submit_turn` waiting for acceptance; a refused turn (policy reject) is a 409."""
    request = SubmitTurnRequest.model_validate(
        {**message.model_dump(), "policy": policy, "wait": "accepted"}
    )
    raw = await _update(ctx, thread_id, UPDATE_SUBMIT_TURN, request, update_id, SubmitTurnResult)
    result = SubmitTurnResult.model_validate(raw)
    if result.status == "rejected":
        raise GatewayError(409, result.reason or f"thread {thread_id!r} refused the turn")
    return result


async def _ask(
    ctx: ApiContext,
    thread_id: str,
    message: QueuedMessage,
    policy: Literal["enqueue", "interrupt", "reject"],
    update_id: str | None,
    timeout: float,
) -> Reply:
    """`submit_turn` waiting for the turn to end (`Threads.ask`): 200 with how it ended,
    202 (not recorded: a retry with the key waits on) when it outlasts `timeout`."""
    try:
        turn = await ask_thread(
            ctx.client,
            thread_id,
            message,
            policy=policy,
            update_id=update_id,
            timeout=timeout,
            store=ctx.store,
        )
    except TurnWaitTimeout as err:
        retry = (
            "POST again with the same Idempotency-Key to wait on (the message is not queued twice)"
            if update_id
            else "follow the thread's events to see it end"
        )
        waiting = TurnWaiting(
            update_id=err.update_id,
            timeout_seconds=timeout,
            message=f"the turn did not end within {timeout:g} s and goes on; {retry}",
        )
        return Reply(202, waiting, keep=False)
    except WorkflowUpdateFailedError as err:
        raise _refusal(thread_id, err) from None
    except RPCError as err:
        raise _rpc_failure(thread_id, err) from None
    if turn.status == "refused":
        raise GatewayError(409, turn.error or f"thread {thread_id!r} refused the turn")
    return Reply(200, turn)


async def _update(
    ctx: ApiContext,
    thread_id: str,
    name: str,
    payload: Any,
    update_id: str | None,
    result_type: type[Any],
) -> Any:
    """Run a checked update; its refusals and Temporal's failures become error replies."""
    handle = ctx.client.get_workflow_handle(thread_id)
    try:
        return await handle.execute_update(
            name, payload, id=update_id, result_type=result_type, rpc_timeout=UPDATE_TIMEOUT
        )
    except WorkflowUpdateFailedError as err:
        raise _refusal(thread_id, err) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise GatewayError(
            503,
            f"thread {thread_id!r} did not take the {name} update within "
            f"{UPDATE_TIMEOUT.total_seconds():g} s (is a worker running?); retry with the "
            "same Idempotency-Key",
        ) from None
    except RPCError as err:
        raise _rpc_failure(thread_id, err) from None


async def _signal(ctx: ApiContext, thread_id: str, name: str, payload: Any) -> None:
    try:
        await ctx.client.get_workflow_handle(thread_id).signal(name, payload)
    except RPCError as err:
        raise _rpc_failure(thread_id, err) from None


async def _live_read(ctx: ApiContext, thread_id: str) -> ThreadRead:
    """The thread's read model by query: the queue as it is now."""
    try:
        read = await ctx.client.get_workflow_handle(thread_id).query(
            QUERY_THREAD_READ, result_type=ThreadRead, rpc_timeout=QUERY_TIMEOUT
        )
    except UNANSWERED:
        raise GatewayError(
            503, f"thread {thread_id!r} did not answer (is a worker running?); retry"
        ) from None
    return ThreadRead.model_validate(read)


def _refusal(thread_id: str, err: WorkflowUpdateFailedError) -> GatewayError:
    """The thread's reason for refusing an update, as the status that fits it."""
    cause = err.cause
    kind = cause.type if isinstance(cause, ApplicationError) else None
    message = cause.message if isinstance(cause, ApplicationError) else str(cause)
    if kind == "ThreadTerminated":
        return GatewayError(409, message)
    if kind == "PayloadTooLarge":
        return GatewayError(413, message)
    if kind == "UnanswerableAction":
        return _unanswerable(message, _reason(cause))
    if kind == "InvalidPayload":
        return GatewayError(422, message)
    if kind == "BudgetNotSettable":
        return GatewayError(409, message)
    return GatewayError(409, f"thread {thread_id!r} refused: {message}")


def _reason(cause: BaseException | None) -> str | None:
    """The `reason` an `UnanswerableAction` refusal carries in its details."""
    details = cause.details if isinstance(cause, ApplicationError) else ()
    first = details[0] if details else None
    return first.get("reason") if isinstance(first, dict) else None


def _unanswerable(message: str, reason: str | None) -> GatewayError:
    """An answer the thread refused: which status fits its reason (contract/actions.py)."""
    if reason == "not_pending":
        return GatewayError(404, message)
    if reason == "wrong_decision":
        return GatewayError(422, message, fields=["decision"])
    if reason == "misfit_answer":  # an elicitation answer its schema refuses
        return GatewayError(422, message, fields=["answer"])
    return GatewayError(409, message)  # already resolved


def _rpc_failure(thread_id: str, err: RPCError) -> GatewayError:
    if err.status == RPCStatusCode.NOT_FOUND:
        # It was running a moment ago (require_running): it has closed since.
        return GatewayError(409, f"thread {thread_id!r} is closed ({err.message})")
    return GatewayError(503, f"Temporal did not answer ({err.message}); retry")


__all__ = ["DEFAULT_TURN_WAIT_SECONDS", "UPDATE_TIMEOUT", "router"]
