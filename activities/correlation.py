"""The ids only running code knows, stamped on the events it stores (seed 001 envelope).

`stamp_event` is the stamper a worker gives the store (store/correlation.py):
an event written by an activity gets the Temporal run and activity attempt of the thread
it belongs to, and any event gets the trace and span that were current when it was
written. Workflow-produced events already carry their run's ids (ThreadMemory.emit) and
are left as they are. `asyncio.to_thread` copies context variables, so the activity and
its current span are seen from the store's worker thread too.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from temporalio import activity

from weft.contract.events import Event


def stamp_event(event: Event) -> Event:
    """`event` with the run, attempt, trace and span ids it lacks, where they are known."""
    if event.run_id is not None:  # produced by a workflow run, with that run's ids
        return event
    changes: dict[str, Any] = {}
    if activity.in_activity():
        info = activity.info()
        # Only the activity's own thread: a copy into a child is not that run's fact.
        if info.workflow_id == event.thread_id and info.workflow_run_id:
            changes["run_id"] = info.workflow_run_id
            if event.attempt_id is None:
                changes["attempt_id"] = f"{info.activity_type}#{info.activity_id}.a{info.attempt}"
    span = trace.get_current_span().get_span_context()
    if span.is_valid and event.trace_id is None:
        changes["trace_id"] = trace.format_trace_id(span.trace_id)
        changes["span_id"] = trace.format_span_id(span.span_id)
    return event.model_copy(update=changes) if changes else event
