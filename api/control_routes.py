"""Steering a running thread over HTTP: queue a message, submit a turn (and wait for it),
answer a pending action, edit the queue, refresh its MCP tools, terminate. Every route is a
POST, idempotent with an `Idempotency-Key` (api/idempotency.py); each answers 404 for an
unknown thread and 409 for a closed one before it acts (docs/http-api.md)."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations of the
# routes, and those name dependencies built inside `router` (a closure, not a global).

import asyncio
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError

from weft.activities.spill import may_spill, spill_queued_content
from weft.api import thread_calls
from weft.api.context import ApiContext, require_running
from weft.api.gateway.app import GatewayError
from weft.api.idempotency import IdempotentRequest, Reply, idempotency
from weft.api.models import (
    POST_ERRORS,
    ActionAnswer,
    InterruptInput,
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
from weft.api.quotas import require_budget_quota
from weft.api.thread_routes import ID_PATH_PATTERN, ThreadId
from weft.client.actions import response
from weft.client.ask import ThreadFailed, TurnWaitTimeout, ask_thread
from weft.client.thread_status import closed_message
from weft.contract.actions import UPDATE_RESPOND_ACTION_CHECKED, RespondActionResult
from weft.contract.budget import UPDATE_SET_BUDGET, BudgetState, SetBudget
from weft.contract.definitions_version import UPDATE_UPGRADE_DEFINITIONS, UpgradeResult
from weft.contract.mcp import SIGNAL_REFRESH_TOOLS, RefreshTools
from weft.contract.messages import (
    InterruptTurnRequest,
    InterruptTurnResult,
    QueuedMessage,
    QueuedTurnRef,
    SubmitTurnRequest,
    SubmitTurnResult,
    TerminateRequest,
)
from weft.contract.thread import (
    SIGNAL_PROMOTE_QUEUED_TURN,
    SIGNAL_REMOVE_QUEUED_TURN,
    SIGNAL_TERMINATE,
    UPDATE_INTERRUPT_TURN,
    UPDATE_SUBMIT_TURN,
)
from weft.contract.turns import TurnResult
from weft.contract.validation import describe_validation_error

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
        responses=error_responses(*_CONTROL_ERRORS, 429),
        summary="Queue a message (submit_turn, enqueue): it starts a turn or waits its turn",
    )
    async def queue_message(
        thread_id: ThreadId, body: MessageInput, request: Idempotent
    ) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            await require_budget_quota(ctx, thread_id)
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
            **error_responses(*_CONTROL_ERRORS, 429),
        },
        summary="Submit a turn with a policy; wait until it is queued, or until it ends",
    )
    async def submit_turn(thread_id: ThreadId, body: TurnInput, request: Idempotent) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            await require_budget_quota(ctx, thread_id)
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
            answer = response(
                action_id, body.decision, answer=body.answer, scope=body.scope, reason=body.reason
            )
            key = request.derived_id("action")
            return await _updated(
                ctx, thread_id, UPDATE_RESPOND_ACTION_CHECKED, answer, key, RespondActionResult
            )

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
            payload = body.model_dump(mode="json", by_alias=True, exclude_none=True)
            key = request.derived_id("budget")
            return await _updated(ctx, thread_id, UPDATE_SET_BUDGET, payload, key, BudgetState)

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
            await thread_calls.signal(ctx, thread_id, SIGNAL_REFRESH_TOOLS, payload)
            return Reply(202, ToolsRefreshRequested(thread_id=thread_id, refresh_requested=servers))

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/interrupt",
        response_model=InterruptTurnResult,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="Stop the running turn without a new message; the thread stays open "
        "(`accepted`, or `noop` when no turn, or not `turnId`, runs)",
    )
    async def interrupt(
        thread_id: ThreadId, request: Idempotent, body: InterruptInput | None = None
    ) -> Response:
        async def act() -> Reply:
            given = body or InterruptInput()
            payload = InterruptTurnRequest(reason=given.reason, turn_id=given.turn_id)
            return await _updated(
                ctx,
                thread_id,
                UPDATE_INTERRUPT_TURN,
                payload.model_dump(mode="json", by_alias=True, exclude_none=True),
                request.derived_id("interrupt"),
                InterruptTurnResult,
            )

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/upgrade",
        response_model=UpgradeResult,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="Move the thread to the newest definitions its workers serve, between turns "
        "(`upgraded`, `unchanged`, or `pending` while a turn runs)",
    )
    async def upgrade(thread_id: ThreadId, request: Idempotent) -> Response:
        async def act() -> Reply:
            key = request.derived_id("upgrade")
            return await _updated(
                ctx, thread_id, UPDATE_UPGRADE_DEFINITIONS, None, key, UpgradeResult
            )

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/terminate",
        status_code=202,
        response_model=TerminateRequested,
        responses=error_responses(*_CONTROL_ERRORS),
        summary="Terminate the thread: it ends what it must and closes (409 when it is "
        "closed, or already terminating)",
    )
    async def terminate(
        thread_id: ThreadId, request: Idempotent, body: TerminateInput | None = None
    ) -> Response:
        async def act() -> Reply:
            await require_running(ctx, thread_id)
            # Still running but already sent `terminate`: it is closing, and a second
            # signal would only be ignored by the thread.
            if await thread_calls.terminate_requested(ctx, thread_id):
                raise GatewayError(
                    409,
                    f"thread {thread_id!r} is already terminating (terminate was requested; "
                    "it closes as terminated)",
                )
            payload = TerminateRequest(reason=body.reason if body else None)
            await thread_calls.signal(
                ctx, thread_id, SIGNAL_TERMINATE, payload.model_dump(by_alias=True)
            )
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
            read = await thread_calls.live_read(ctx, thread_id)
            if queue_id not in {item.queue_id for item in read.queue}:
                raise GatewayError(404, f"thread {thread_id!r} has no queued turn {queue_id!r}")
            ref = QueuedTurnRef(queue_id=queue_id).model_dump(by_alias=True)
            await thread_calls.signal(ctx, thread_id, signal, ref)
            return Reply(
                202, QueueEditRequested(thread_id=thread_id, queue_id=queue_id, action=action)
            )

        return await request.run(act)


# -- the message ---------------------------------------------------------------------------


async def _updated(
    ctx: ApiContext,
    thread_id: str,
    update: str,
    payload: Any,
    update_id: str | None,
    result_type: type[BaseModel],
) -> Reply:
    """Run checked update `update` on running thread `thread_id`; 200 with its result
    (404 for an unknown thread, 409 for a closed one, before anything is sent)."""
    await require_running(ctx, thread_id)
    result = await thread_calls.update(ctx, thread_id, update, payload, update_id, result_type)
    return Reply(200, result_type.model_validate(result))


async def _queued(ctx: ApiContext, body: MessageInput) -> QueuedMessage:
    """The message to send: content over 64 KiB goes to the store as a blob first, and the
    message carries a preview and `metadata.contentRef` (as `Threads` does)."""
    content, ref = body.content, dict[str, Any]()
    if may_spill(content):  # no thread hop for the common short message
        content, ref = await asyncio.to_thread(spill_queued_content, ctx.store, content)
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
    raw = await thread_calls.update(
        ctx, thread_id, UPDATE_SUBMIT_TURN, request, update_id, SubmitTurnResult
    )
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
    except ThreadFailed as err:
        # It failed under the wait (a worker refused it): closed, as every route says it.
        failed = closed_message(thread_id, WorkflowExecutionStatus.FAILED)
        raise GatewayError(409, f"{failed}: {err.reason}") from None
    except WorkflowUpdateFailedError as err:
        raise thread_calls.refusal(thread_id, err) from None
    except RPCError as err:
        raise await thread_calls.rpc_failure(ctx, thread_id, err) from None
    if turn.status == "refused":
        raise GatewayError(409, turn.error or f"thread {thread_id!r} refused the turn")
    return Reply(200, turn)


__all__ = ["DEFAULT_TURN_WAIT_SECONDS", "router"]
