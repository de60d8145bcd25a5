"""How a workflow's latest run closed, as Temporal tells it, when it closed without
returning: terminated or cancelled through Temporal (its CLI or UI), timed out, or failed.

A job's run writes its own end before it returns; a run closed any other way writes
nothing, so the store would say `running` for ever. The readers ask this (one describe,
and the close event when it closed) and record the end Temporal states (docs/jobs.md).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHistoryEventFilterType
from temporalio.service import RPCError

_log = logging.getLogger(__name__)

ClosedAs = Literal["terminated", "timed_out", "failed", "cancelled"]
Record = TypeVar("Record")

# Ids one visibility query names at most, and how many describes run at once.
_IDS_PER_QUERY = 100
_DESCRIBES_AT_ONCE = 8
# An id that can go into a visibility query as a string literal; another is described.
_QUERY_SAFE = re.compile(r"^[^'\"\\]*$")

# The closes a run does not write itself (a run that returns is `COMPLETED`; one that
# continued as new goes on in its next run).
_UNWRITTEN: dict[WorkflowExecutionStatus, ClosedAs] = {
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
}
# The same statuses as a visibility query names them.
_CLOSED_STATUSES = ("Terminated", "TimedOut", "Failed", "Canceled")


@dataclass(frozen=True)
class RunClose:
    """A run's close as Temporal states it: which run, how, why (Temporal's words) and
    when."""

    run_id: str
    closed_as: ClosedAs
    reason: str
    closed_at: datetime


async def unwritten_close(client: Client, workflow_id: str) -> RunClose | None:
    """How the workflow's latest run closed, when it closed without returning; None while
    it runs, when it returned or continued as new, and when Temporal does not answer or
    does not know it (the store's word then stands: a reader never fails for this)."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
        closed_as = _UNWRITTEN.get(described.status) if described.status else None
        if closed_as is None or described.close_time is None:
            return None
        run = client.get_workflow_handle(workflow_id, run_id=described.run_id)
        close = None
        async for event in run.fetch_history_events(
            event_filter_type=WorkflowHistoryEventFilterType.CLOSE_EVENT
        ):
            close = event
    except RPCError:
        return None
    return RunClose(
        run_id=described.run_id,
        closed_as=closed_as,
        reason=_reason(closed_as, close),
        closed_at=described.close_time,
    )


def _reason(closed_as: ClosedAs, close: HistoryEvent | None) -> str:
    """The run's end in Temporal's words: the termination's reason and who asked, the
    failure's message."""
    if close is not None and close.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
        terminated = close.workflow_execution_terminated_event_attributes
        said = f": {terminated.reason}" if terminated.reason else " (no reason given)"
        who = f" by {terminated.identity}" if terminated.identity else ""
        return f"its run was terminated through Temporal{who}{said}"
    if close is not None and close.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
        message = close.workflow_execution_failed_event_attributes.failure.message
        return f"its run failed: {message or 'no message'}"
    return {
        "terminated": "its run was terminated through Temporal",
        "timed_out": "its run timed out (the workflow's execution timeout)",
        "failed": "its run failed",
        "cancelled": "its run was cancelled through Temporal",
    }[closed_as]


async def record_listed_closes(
    client: Client,
    records: Sequence[Record],
    workflow_id: Callable[[Record], str],
    record_end: Callable[[Record], Awaitable[bool]],
) -> bool:
    """Record the unwritten ends of the open `records` a listing holds: one visibility
    query (per 100 ids) finds those with a run closed without returning, and only those
    are described and recorded (`record_end`, a few at a time), so a listing of many open
    jobs or tasks costs one query, not a describe each. Visibility lags a close by a
    moment: a run closed just now is recorded by the next read. True when any end was
    stored."""
    by_id = {workflow_id(r): r for r in records}
    candidates = [by_id[i] for i in await _closed_among(client, list(by_id))]
    return await record_each_close(candidates, record_end)


async def record_each_close(
    records: Sequence[Record], record_end: Callable[[Record], Awaitable[bool]]
) -> bool:
    """`record_end` of every record, a few at a time (each describes its run: no
    visibility lag, for a caller that must know now); True when any end was stored."""
    gate = asyncio.Semaphore(_DESCRIBES_AT_ONCE)

    async def checked(record: Record) -> bool:
        async with gate:
            return await record_end(record)

    return any(await asyncio.gather(*(checked(r) for r in records)))


async def _closed_among(client: Client, workflow_ids: list[str]) -> list[str]:
    """The ids among `workflow_ids` with a run visibility lists as closed without
    returning (an earlier run's close too: `record_end` describes the latest); an id a
    query cannot name is kept, to be described."""
    listable = [i for i in workflow_ids if _QUERY_SAFE.fullmatch(i)]
    found = [i for i in workflow_ids if not _QUERY_SAFE.fullmatch(i)]
    closed = ", ".join(f"'{s}'" for s in _CLOSED_STATUSES)
    for start in range(0, len(listable), _IDS_PER_QUERY):
        batch = listable[start : start + _IDS_PER_QUERY]
        names = ", ".join(f"'{i}'" for i in batch)
        query = f"WorkflowId IN ({names}) AND ExecutionStatus IN ({closed})"
        try:
            found.extend({w.id async for w in client.list_workflows(query)})
        except RPCError as error:  # the store's word stands, as in `unwritten_close`
            _log.warning("could not list closed runs of %d ids: %s", len(batch), error.message)
    return found
