"""What every route of the API shares: the store, Temporal, the event feed and idempotency.

Routes get one `ApiContext`; they never build clients or read configuration themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from weft.api.gateway.app import GatewayError
from weft.client.thread_status import closed_message
from weft.client.threads import Threads
from weft.contract.events import Event
from weft.store import Store


class EventFeed(Protocol):
    """New events of a thread, pushed (PostgreSQL LISTEN/NOTIFY) or polled once per process."""

    async def wait_for_events(self, thread_id: str, after: int, timeout: float) -> list[Event]:
        """The thread's stored events with sequence > `after`, in order, as soon as there is
        at least one; `[]` once `timeout` seconds pass with none."""
        ...

    async def close(self) -> None:
        """Stop listening or polling; waiters return what they have."""
        ...


@dataclass(frozen=True)
class ApiContext:
    store: Store
    client: Client
    threads: Threads
    feed: EventFeed
    task_queue: str


async def thread_status(ctx: ApiContext, thread_id: str) -> WorkflowExecutionStatus:
    """The thread's workflow status; `GatewayError(404)` for a thread Temporal does not know."""
    try:
        description = await ctx.client.get_workflow_handle(thread_id).describe()
    except RPCError as err:
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise GatewayError(404, f"no thread {thread_id!r}") from None
        raise GatewayError(503, f"Temporal did not answer ({err.message}); retry") from None
    if description.status is None:
        raise GatewayError(503, f"Temporal gave no status for thread {thread_id!r}; retry")
    return description.status


async def require_running(ctx: ApiContext, thread_id: str) -> None:
    """404 for an unknown thread, 409 for one that has closed, worded as the CLI words it
    (`client/thread_status.py`: terminated, failed, timed_out)."""
    status = await thread_status(ctx, thread_id)
    if status != WorkflowExecutionStatus.RUNNING:
        raise GatewayError(409, closed_message(thread_id, status))


__all__ = ["ApiContext", "EventFeed", "require_running", "thread_status"]
