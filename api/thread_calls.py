"""What the control routes ask of a running thread's workflow (updates, signals, the read
query, its history) and how Temporal's answers become error replies: a refusal by the
thread's status, a thread that closed meanwhile as `closed_message` words it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import (
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from weft.api.context import ApiContext, thread_status
from weft.api.gateway.app import GatewayError
from weft.client.liveness import QUERY_TIMEOUT, UNANSWERED
from weft.client.thread_status import closed_message, is_closed
from weft.contract.thread import QUERY_THREAD_READ, SIGNAL_TERMINATE, ThreadRead

# How long an update may wait to be accepted: a thread no worker runs never accepts it.
UPDATE_TIMEOUT = timedelta(seconds=30)


async def update(
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
        raise refusal(thread_id, err) from None
    except WorkflowUpdateRPCTimeoutOrCancelledError:
        raise GatewayError(
            503,
            f"thread {thread_id!r} did not take the {name} update within "
            f"{UPDATE_TIMEOUT.total_seconds():g} s (is a worker running?); retry with the "
            "same Idempotency-Key",
        ) from None
    except RPCError as err:
        raise await rpc_failure(ctx, thread_id, err) from None


async def signal(ctx: ApiContext, thread_id: str, name: str, payload: Any) -> None:
    try:
        await ctx.client.get_workflow_handle(thread_id).signal(name, payload)
    except RPCError as err:
        raise await rpc_failure(ctx, thread_id, err) from None


async def live_read(ctx: ApiContext, thread_id: str) -> ThreadRead:
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


async def terminate_requested(ctx: ApiContext, thread_id: str) -> bool:
    """Whether the thread's current run was already sent `terminate`: it is closing.

    Read from the run's history, not asked of the thread: a signal is in the history as
    soon as it is sent, so a second terminate right after the first sees it even before the
    thread has run, and with no worker running at all."""
    handle = ctx.client.get_workflow_handle(thread_id)
    try:
        async for event in handle.fetch_history_events(rpc_timeout=UPDATE_TIMEOUT):
            if (
                event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
                and event.workflow_execution_signaled_event_attributes.signal_name
                == SIGNAL_TERMINATE
            ):
                return True
    except RPCError as err:
        raise await rpc_failure(ctx, thread_id, err) from None
    return False


def refusal(thread_id: str, err: WorkflowUpdateFailedError) -> GatewayError:
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


async def rpc_failure(ctx: ApiContext, thread_id: str, err: RPCError) -> GatewayError:
    """Temporal's failure as a reply. NOT_FOUND: the thread was running a moment ago
    (require_running) and has closed since; say how, as every closed-thread reply does."""
    if err.status != RPCStatusCode.NOT_FOUND:
        return GatewayError(503, f"Temporal did not answer ({err.message}); retry")
    try:
        status = await thread_status(ctx, thread_id)
    except GatewayError as error:
        return error
    if is_closed(status):
        return GatewayError(409, closed_message(thread_id, status))
    return GatewayError(409, f"thread {thread_id!r} is closed ({err.message})")


__all__ = [
    "UPDATE_TIMEOUT",
    "live_read",
    "refusal",
    "rpc_failure",
    "signal",
    "terminate_requested",
    "update",
]
