"""Starting a thread and confirming it took: an unknown agent is the caller's error, not a
thread that fails out of sight.

Only the worker knows its definitions (Python tools and agents live in its process), so the
client starts the workflow and waits for the worker's `thread.init` verdict: the thread
leaves `preparing`, or the workflow fails with the reason (`UnknownAgent`,
`MissingVariable`, …). With no worker polling, the verdict cannot come: after `timeout` the
started thread is returned unconfirmed, since a worker that comes later will run it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio.client import (
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.service import RPCError

from weft.client.threads import Threads
from weft.contract.thread import QUERY_THREAD_READ, ThreadRead

CONFIRM_TIMEOUT = 15.0
_POLL = 0.05
_QUERY_WAIT = 2.0


class ThreadStartRefused(ValueError):
    """The thread started but its worker refused it; the message says why (the agent, a
    missing variable, …). The workflow has already failed: nothing is left running."""

    def __init__(self, thread_id: str, reason: str) -> None:
        super().__init__(reason)
        self.thread_id = thread_id
        self.reason = reason


@dataclass(frozen=True)
class StartedThread:
    handle: WorkflowHandle[Any, Any]
    # False when no worker gave its verdict within the timeout (none may be running).
    confirmed: bool

    @property
    def thread_id(self) -> str:
        return self.handle.id


async def start_confirmed(
    threads: Threads,
    agent: str,
    *,
    messages: Sequence[str | dict[str, Any]] = (),
    thread_id: str | None = None,
    timeout: float = CONFIRM_TIMEOUT,
    **fields: Any,
) -> StartedThread:
    """Start a thread of `agent` and wait for the worker to accept it.

    Raises `ThreadStartRefused` when the worker refuses it, and whatever `Threads.start`
    raises for input the client can check itself (pydantic's ValidationError, Temporal's
    WorkflowAlreadyStartedError).
    """
    handle = await threads.start(agent, messages=messages, thread_id=thread_id, **fields)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while (left := deadline - loop.time()) > 0:
        verdict = await _verdict(handle, timedelta(seconds=min(left, _QUERY_WAIT)))
        if verdict is not None:
            return StartedThread(handle, confirmed=verdict)
        await asyncio.sleep(_POLL)
    return StartedThread(handle, confirmed=False)


async def _verdict(handle: WorkflowHandle[Any, Any], wait: timedelta) -> bool | None:
    """True once the thread is past `preparing`; None while it is not known yet."""
    try:
        described = await handle.describe()
    except RPCError:
        return None
    if described.status != WorkflowExecutionStatus.RUNNING:
        await _raise_refusal(handle)
        return True  # it ran and closed on its own (a thread that ends at once)
    try:
        # With no worker polling, a query waits for one: bound it by what is left.
        read = await handle.query(QUERY_THREAD_READ, result_type=ThreadRead, rpc_timeout=wait)
    except (RPCError, WorkflowQueryFailedError):
        return None  # its first workflow task has not run yet
    status = ThreadRead.model_validate(read).status
    if status == "failed":
        # Its init failed: the workflow is closing with the reason (a query can answer
        # from the worker's cache before the close is recorded).
        await _raise_refusal(handle)
    return status != "preparing" or None


async def _raise_refusal(handle: WorkflowHandle[Any, Any]) -> None:
    """Raise `ThreadStartRefused` with the innermost failure message, if the thread failed."""
    try:
        await handle.result()
    except WorkflowFailureError as err:
        cause: BaseException = err
        while cause.__cause__ is not None:
            cause = cause.__cause__
        raise ThreadStartRefused(handle.id, str(cause)) from None


__all__ = ["CONFIRM_TIMEOUT", "StartedThread", "ThreadStartRefused", "start_confirmed"]
