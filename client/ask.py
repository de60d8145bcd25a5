"""Ask a thread and wait for the answer: `submit_turn` with `wait: "completed"`.

The update is durable once accepted (it is in the thread's history), so a worker restart
only delays the answer. A call that is cut (an RPC deadline, a restarted client) re-attaches
to the same update by its id; sending it again with the same id is deduplicated by
Temporal within a run, and by the thread itself after it continued as new.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any, Literal

from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.messages import QueuedMessage, SubmitTurnRequest, SubmitTurnResult
from weft.contract.thread import UPDATE_SUBMIT_TURN
from weft.contract.turns import TurnResult
from weft.store import Store

Policy = Literal["enqueue", "interrupt", "reject"]


class TurnWaitTimeout(TimeoutError):
    """`ask` gave up waiting; the turn goes on. Re-attach with `update_id`."""

    def __init__(self, thread_id: str, update_id: str, timeout: float) -> None:
        super().__init__(
            f"no answer from thread {thread_id} within {timeout:g}s; the turn goes on: "
            f"ask again with update_id={update_id!r} to wait for it"
        )
        self.thread_id = thread_id
        self.update_id = update_id


class ThreadFailed(RuntimeError):
    """The thread's workflow failed, so no turn can answer; `reason` is the innermost
    failure (for a thread its worker refused: the unknown agent, the worker's agents and
    its task queue)."""

    def __init__(self, thread_id: str, reason: str) -> None:
        super().__init__(f"thread {thread_id} failed: {reason}")
        self.thread_id = thread_id
        self.reason = reason


async def failure_reason(handle: WorkflowHandle[Any, Any]) -> str | None:
    """The innermost failure message of a failed workflow; None while it runs or when it
    closed otherwise."""
    try:
        if (await handle.describe()).status != WorkflowExecutionStatus.FAILED:
            return None
        await handle.result(follow_runs=False)
    except RPCError:
        return None  # no such workflow
    except WorkflowFailureError as err:
        cause: BaseException = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        return str(cause)
    return None


async def ask_thread(
    client: Client,
    thread_id: str,
    message: QueuedMessage,
    *,
    policy: Policy = "enqueue",
    update_id: str | None = None,
    timeout: float | None = None,
    store: Store | None = None,
) -> TurnResult:
    """Submit `message` as a turn and return how that turn ended.

    With `update_id`, an update already sent with that id (by an earlier call, maybe of
    another process) is waited for instead of sending the message again.
    """
    request = SubmitTurnRequest.model_validate(
        {**message.model_dump(), "policy": policy, "wait": "completed"}
    )
    waiter = _Waiter(client, thread_id, request, update_id or f"ask-{uuid.uuid4().hex}", timeout)
    try:
        result = await waiter.run(attach_first=update_id is not None)
    except (WorkflowUpdateFailedError, RPCError) as err:
        started = _start_failure(err)
        if started is not None:  # the thread answered: it could not start, and why
            raise ThreadFailed(thread_id, started) from None
        if not _closed_under_it(err):
            raise
        # The workflow closed before answering (`AcceptedUpdateCompletedWorkflow`, or not
        # found as running): say why it failed rather than what the update saw.
        reason = await failure_reason(client.get_workflow_handle(thread_id))
        if reason is None:
            raise
        raise ThreadFailed(thread_id, reason) from None
    if result.turn is None:
        raise RuntimeError(
            f"thread {thread_id} answered submit_turn without a turn result: its worker "
            "predates wait=completed"
        )
    return await _with_response(result.turn, thread_id, store)


def _start_failure(err: WorkflowUpdateFailedError | RPCError) -> str | None:
    """Why the thread could not start, when the update failed for that reason."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, ApplicationError) and cause.type == "ThreadStartFailed":
        return cause.message
    return None


def _closed_under_it(err: WorkflowUpdateFailedError | RPCError) -> bool:
    """True when the update failed because the workflow is not running any more."""
    if isinstance(err, RPCError):
        return err.status == RPCStatusCode.NOT_FOUND
    cause = err.cause
    return isinstance(cause, ApplicationError) and cause.type == "AcceptedUpdateCompletedWorkflow"


class _Waiter:
    """One `ask`: send or re-attach until the update's outcome arrives or time runs out."""

    def __init__(
        self,
        client: Client,
        thread_id: str,
        request: SubmitTurnRequest,
        update_id: str,
        timeout: float | None,
    ) -> None:
        self._client = client
        self._thread_id = thread_id
        self._request = request
        self._update_id = update_id
        self._timeout = timeout
        self._started = time.monotonic()
        # The run that accepted the update: its outcome stays there after continue-as-new.
        self._run_id: str | None = None

    async def run(self, *, attach_first: bool) -> SubmitTurnResult:
        attach = attach_first
        while True:
            try:
                # `rpc_timeout` bounds each poll only: Temporal answers a long poll with "no
                # outcome yet" (about every 20 s) and the SDK polls again, so `timeout` is
                # kept here, over the whole wait (a queued turn once waited forever).
                async with asyncio.timeout(self._overall()):
                    handle = await (self._attach() if attach else self._send())
                    return SubmitTurnResult.model_validate(
                        await handle.result(rpc_timeout=self._remaining())
                    )
            except (WorkflowUpdateRPCTimeoutOrCancelledError, TimeoutError):
                # The SDK turns a cancellation of this task into this error too.
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise asyncio.CancelledError() from None
                if self._timeout is not None and self._remaining_seconds() <= 0:
                    raise TurnWaitTimeout(self._thread_id, self._update_id, self._timeout) from None
                attach = True  # cut: wait for the same update again
            except RPCError as err:
                if not (attach and err.status == RPCStatusCode.NOT_FOUND):
                    raise
                # No such update (never admitted, or accepted by a run since continued as
                # new): send it; the thread answers a known update id from its memory.
                attach, self._run_id = False, None

    async def _send(self) -> WorkflowUpdateHandle[SubmitTurnResult]:
        handle = await self._client.get_workflow_handle(self._thread_id).start_update(
            UPDATE_SUBMIT_TURN,
            self._request,
            id=self._update_id,
            wait_for_stage=WorkflowUpdateStage.ACCEPTED,
            result_type=SubmitTurnResult,
            rpc_timeout=self._remaining(),
        )
        self._run_id = handle.workflow_run_id
        return handle

    async def _attach(self) -> WorkflowUpdateHandle[SubmitTurnResult]:
        return self._client.get_workflow_handle(self._thread_id).get_update_handle(
            self._update_id, workflow_run_id=self._run_id, result_type=SubmitTurnResult
        )

    def _remaining(self) -> timedelta | None:
        """The RPC deadline: what is left of `timeout` (None: the server's long poll)."""
        if self._timeout is None:
            return None
        return timedelta(seconds=max(self._remaining_seconds(), 0.001))

    def _overall(self) -> float | None:
        return None if self._timeout is None else max(self._remaining_seconds(), 0.0)

    def _remaining_seconds(self) -> float:
        return self._started + (self._timeout or 0.0) - time.monotonic()


async def _with_response(turn: TurnResult, thread_id: str, store: Store | None) -> TurnResult:
    """A result replayed after continue-as-new has no text: read it from the store."""
    if turn.response is not None or turn.message_id is None or store is None:
        return turn
    message = await asyncio.to_thread(store.messages.get, thread_id, turn.message_id)
    if message is None:
        return turn
    return turn.model_copy(update={"response": message.content})
