"""An event batch's rows are made in one pass with their wire JSON, and each row
projection (subagents, effects, budget ledgers, queue depth) runs only for a batch that
holds its events."""

from __future__ import annotations

from typing import Any

import pytest
from store_factories import event, new_thread_id

import weft.store.events as store_events
from weft.store import Store
from weft.store.queue_rows import project_queue_depth


def _refuse(name: str) -> Any:
    def projection(*args: Any) -> None:
        raise AssertionError(f"{name} ran for a batch without its events")

    return projection


def test_a_batch_without_projected_events_runs_no_projection(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("project_subagents", "project_effects", "project_budgets", "project_queue_depth"):
        monkeypatch.setattr(store_events, name, _refuse(name))
    thread_id = new_thread_id()
    batch = [
        event(thread_id, "r", "model.requested", payload={"model": "m"}),
        event(thread_id, "c", "model.completed", payload={"text": "héllo ✓"}),
    ]
    stored = store.events.append(batch)
    assert [e.sequence for e in stored] == [1, 2]
    # Each row's JSON is the event's wire form, with its sequence.
    assert [e.to_wire() for e in store.events.read(thread_id)] == [e.to_wire() for e in stored]


def test_a_batch_with_projected_events_runs_only_their_projections(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[str] = []

    def queue_depth(*args: Any) -> None:
        ran.append("queue")
        project_queue_depth(*args)

    monkeypatch.setattr(store_events, "project_queue_depth", queue_depth)
    for name in ("project_subagents", "project_effects", "project_budgets"):
        monkeypatch.setattr(store_events, name, _refuse(name))
    thread_id = new_thread_id()
    store.events.append(
        [
            event(thread_id, "q", "queue.changed", payload={"queue": [{"queueId": "q1"}]}),
            event(thread_id, "t", "turn.submitted", payload={}),
        ]
    )
    assert ran == ["queue"]
