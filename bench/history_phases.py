"""What Temporal's own history says about a run: its size, its span and where the time went.

Everything here reads server event timestamps, so it measures both sides of a comparison
the same way whatever runs in the worker. Event ids restart in every run of a
continue-as-new chain, so events are keyed by (run, event id).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

E = EventType
WORKFLOW_TASK = "workflow task"


@dataclass
class Timed:
    """How many times a phase ran and its total seconds, split by where the time went."""

    count: int = 0
    queued: float = 0.0  # scheduled -> started: waiting for a poller
    running: float = 0.0  # started -> completed (or failed / timed out)


@dataclass
class HistoryFigures:
    """One workflow's history (every run of it): sizes and the timed phases of a span."""

    events: int
    runs: int
    total_bytes: int
    largest_event_bytes: int
    largest_event_type: str
    span_seconds: float
    phases: dict[str, Timed] = field(default_factory=dict)

    def accounted_seconds(self) -> float:
        """The span's time that some phase accounts for (queued + running, every phase)."""
        return sum(t.queued + t.running for t in self.phases.values())


def per_step_ms(seconds: float, steps: int) -> float:
    """`seconds` in milliseconds per step."""
    return seconds / steps * 1000


def analyse(
    histories: list[Any],
    *,
    begins: Callable[[HistoryEvent], bool],
    ends_after: Callable[[list[tuple[int, HistoryEvent]]], int],
) -> HistoryFigures:
    """Sizes over every event; span and phases between the first event `begins` accepts
    and the index `ends_after` picks in the (run, event) list."""
    events = [(run, event) for run, history in enumerate(histories) for event in history.events]
    sizes = [event.ByteSize() for _, event in events]
    largest = max(range(len(events)), key=sizes.__getitem__)
    first = next(i for i, (_, event) in enumerate(events) if begins(event))
    last = ends_after(events)
    window = events[first : last + 1]
    return HistoryFigures(
        events=len(events),
        runs=len(histories),
        total_bytes=sum(sizes),
        largest_event_bytes=sizes[largest],
        largest_event_type=E.Name(events[largest][1].event_type).removeprefix("EVENT_TYPE_"),
        span_seconds=_seconds(window[-1][1]) - _seconds(window[0][1]),
        phases=phases(window),
    )


def whole_workflow(events: list[tuple[int, HistoryEvent]]) -> int:
    """`ends_after` for a workflow that completes: its last event."""
    return len(events) - 1


def after_last_activity(activity_type: str) -> Callable[[list[tuple[int, HistoryEvent]]], int]:
    """`ends_after` for a thread that goes idle: the workflow task completed right after the
    last `activity_type` activity completed (the task that ends the turn)."""

    def pick(events: list[tuple[int, HistoryEvent]]) -> int:
        scheduled = _activity_types(events)
        last_done = max(
            i
            for i, (run, event) in enumerate(events)
            if event.event_type == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
            and scheduled.get(
                (run, event.activity_task_completed_event_attributes.scheduled_event_id)
            )
            == activity_type
        )
        return next(
            i
            for i in range(last_done, len(events))
            if events[i][1].event_type == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
        )

    return pick


def phases(window: list[tuple[int, HistoryEvent]]) -> dict[str, Timed]:
    """Workflow tasks and each activity type: count, queued and running seconds."""
    activity_types = _activity_types(window)
    scheduled_at: dict[tuple[int, int], float] = {}
    started_at: dict[tuple[int, int], float] = {}
    timed: dict[str, Timed] = defaultdict(Timed)
    for run, event in window:
        kind, at = event.event_type, _seconds(event)
        if kind in (E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED):
            scheduled_at[(run, event.event_id)] = at
        elif kind == E.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            key = (run, event.workflow_task_started_event_attributes.scheduled_event_id)
            _started(timed[WORKFLOW_TASK], scheduled_at, started_at, key, at)
        elif kind == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            key = (run, event.activity_task_started_event_attributes.scheduled_event_id)
            name = activity_types.get(key, "?")
            _started(timed[name], scheduled_at, started_at, key, at)
        elif (ended := _ended_task(event)) is not None:
            is_workflow_task, scheduled_id = ended
            key = (run, scheduled_id)
            name = WORKFLOW_TASK if is_workflow_task else activity_types.get(key, "?")
            if key in started_at:
                timed[name].running += at - started_at.pop(key)
    return dict(timed)


def _started(
    phase: Timed,
    scheduled_at: dict[tuple[int, int], float],
    started_at: dict[tuple[int, int], float],
    key: tuple[int, int],
    at: float,
) -> None:
    phase.count += 1
    phase.queued += at - scheduled_at.get(key, at)
    started_at[key] = at


def _ended_task(event: HistoryEvent) -> tuple[bool, int] | None:
    """(is it a workflow task, its scheduled event id) for an event that ends a task."""
    kind = event.event_type
    if kind == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        return True, event.workflow_task_completed_event_attributes.scheduled_event_id
    if kind == E.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        return True, event.workflow_task_failed_event_attributes.scheduled_event_id
    if kind == E.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
        return True, event.workflow_task_timed_out_event_attributes.scheduled_event_id
    if kind == E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
        return False, event.activity_task_completed_event_attributes.scheduled_event_id
    if kind == E.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        return False, event.activity_task_failed_event_attributes.scheduled_event_id
    if kind == E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        return False, event.activity_task_timed_out_event_attributes.scheduled_event_id
    return None


def _activity_types(events: list[tuple[int, HistoryEvent]]) -> dict[tuple[int, int], str]:
    return {
        (run, event.event_id): event.activity_task_scheduled_event_attributes.activity_type.name
        for run, event in events
        if event.event_type == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }


def _seconds(event: HistoryEvent) -> float:
    return event.event_time.ToNanoseconds() / 1e9


def is_execution_started(event: HistoryEvent) -> bool:
    """`begins` for a workflow measured from its start."""
    return event.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED


def is_signal(name: str) -> Callable[[HistoryEvent], bool]:
    """`begins` for a span opened by the first signal called `name`."""

    def match(event: HistoryEvent) -> bool:
        return (
            event.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
            and event.workflow_execution_signaled_event_attributes.signal_name == name
        )

    return match
