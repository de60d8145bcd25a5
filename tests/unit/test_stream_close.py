"""The event stream asks Temporal at once whether the log's owner closed after an event
that says it is closing: a thread's final status, or a task's ending."""

from __future__ import annotations

from typing import Any

import pytest

from weft.api.event_routes import announces_close
from weft.contract.events import Event


def _event(event_type: str, payload: Any = None) -> Event:
    return Event(
        type=event_type,
        event_id=f"evt_{event_type}",
        timestamp="2026-11-27T00:00:00.000Z",
        thread_id="task-0123456789ab",
        payload=payload,
    )


@pytest.mark.parametrize(
    "event_type", ["task.completed", "task.failed", "task.timed_out", "task.cancelled"]
)
def test_a_task_ending_announces_the_close(event_type: str) -> None:
    assert announces_close(_event(event_type, {"reason": "done"}))


def test_a_closing_thread_announces_it_and_other_events_do_not() -> None:
    assert announces_close(_event("thread.updated", {"status": "cancelled"}))
    assert announces_close(_event("snapshot.updated", {"threadRead": {"status": "failed"}}))
    assert not announces_close(_event("thread.updated", {"status": "running"}))
    assert not announces_close(_event("task.started", {}))
    assert not announces_close(_event("task.attempt.started", {}))
