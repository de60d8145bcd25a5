"""Context boundaries: written once per id with their events, read in write order."""

from __future__ import annotations

import threading
from typing import Any

from store_factories import event, message, new_thread_id

from weft.contract.context import ContextBoundary
from weft.store import Store


def boundary(thread_id: str, boundary_id: str, first_kept: int, **fields: Any) -> ContextBoundary:
    """A summary boundary keeping messages from `first_kept` on."""
    values: dict[str, Any] = {
        "boundary_id": boundary_id,
        "thread_id": thread_id,
        "kind": "summary",
        "reason": "budget",
        "first_kept_position": first_kept,
        "summarised_from_position": 0,
        "summarised_messages": first_kept,
        "summary": f"summary up to {first_kept}",
        "tokens_before": 1000,
        "tokens_after": 200,
        "created_at": "2025-11-21T10:00:00.000Z",
    }
    return ContextBoundary.model_validate({**values, **fields})


def test_add_get_latest_and_list_in_write_order(store: Store) -> None:
    """Boundaries list in the order they were written, not by id, position or time."""
    thread = new_thread_id()
    assert store.boundaries.latest(thread) is None
    assert store.boundaries.list(thread) == []
    first = boundary(thread, "b-z", 10, created_at="2025-11-21T12:00:00.000Z")
    second = boundary(
        thread,
        "b-a",
        4,
        kind="cut",
        reason="overflow",
        pinned_message_ids=["m1"],
        model="gpt",
        previous_boundary_id="b-z",
        turn_id="turn-1",
        step_id="step-1",
        created_at="2025-11-21T11:00:00.000Z",
    )
    assert store.boundaries.add(first) == first
    assert store.boundaries.add(second) == second
    assert store.boundaries.get(thread, "b-a") == second
    assert store.boundaries.get(thread, "missing") is None
    assert store.boundaries.latest(thread) == second
    assert [b.boundary_id for b in store.boundaries.list(thread)] == ["b-z", "b-a"]


def test_boundaries_are_per_thread(store: Store) -> None:
    """The same boundary id in two threads is two boundaries."""
    one, other = new_thread_id(), new_thread_id()
    store.boundaries.add(boundary(one, "b1", 3))
    store.boundaries.add(boundary(other, "b1", 7))
    assert store.boundaries.get(one, "b1").first_kept_position == 3  # type: ignore[union-attr]
    assert store.boundaries.latest(other).first_kept_position == 7  # type: ignore[union-attr]


def test_add_is_idempotent_by_id_and_returns_the_stored_boundary(store: Store) -> None:
    """A retried add, even with another summary, keeps the first write and returns it."""
    thread = new_thread_id()
    original = boundary(thread, "b1", 5)
    store.boundaries.add(original)
    again = store.boundaries.add(original.model_copy(update={"summary": "a retry's summary"}))
    assert again == original
    assert store.boundaries.list(thread) == [original]


def test_events_are_written_and_numbered_with_the_boundary(store: Store) -> None:
    """Events given to `add` are stored in its commit, numbered after the thread's others."""
    thread = new_thread_id()
    store.events.append([event(thread, "e1")])
    completed = event(thread, "e2", "context.compaction.completed", payload={"boundaryId": "b1"})
    store.boundaries.add(boundary(thread, "b1", 5), [completed])
    read = store.events.read(thread)
    assert [(e.event_id, e.sequence) for e in read] == [("e1", 1), ("e2", 2)]
    assert read[1].type == "context.compaction.completed"
    assert read[1].payload == {"boundaryId": "b1"}


def test_duplicate_add_writes_no_events(store: Store) -> None:
    """A retry whose events carry new ids (another attempt) still stores nothing new."""
    thread = new_thread_id()
    store.boundaries.add(boundary(thread, "b1", 5), [event(thread, "attempt-1")])
    store.boundaries.add(boundary(thread, "b1", 5), [event(thread, "attempt-1")])
    store.boundaries.add(boundary(thread, "b1", 5), [event(thread, "attempt-2")])
    assert [e.event_id for e in store.events.read(thread)] == ["attempt-1"]
    assert store.events.last_sequence(thread) == 1


def test_event_ids_already_stored_are_skipped(store: Store) -> None:
    """An event the thread already has is not stored again by a new boundary."""
    thread = new_thread_id()
    store.events.append([event(thread, "e1")])
    store.boundaries.add(boundary(thread, "b1", 5), [event(thread, "e1"), event(thread, "e2")])
    assert [(e.event_id, e.sequence) for e in store.events.read(thread)] == [("e1", 1), ("e2", 2)]


def test_get_many_returns_known_messages_in_position_order(store: Store) -> None:
    """Pinned messages load in position order; unknown ids and other threads are skipped."""
    thread, other = new_thread_id(), new_thread_id()
    store.messages.append([message(thread, p) for p in range(4)] + [message(other, 9)])
    loaded = store.messages.get_many(thread, ["m3", "unknown", "m0", "m9", "m3"])
    assert [m.id for m in loaded] == ["m0", "m3"]
    assert store.messages.get_many(thread, []) == []


def test_concurrent_adds_of_one_boundary_store_it_once(store: Store) -> None:
    """Racing retries of one compaction all return the same boundary and one event."""
    thread = new_thread_id()
    results: list[ContextBoundary] = []

    def add(attempt: int) -> None:
        built = boundary(thread, "b1", 5, summary=f"attempt {attempt}")
        results.append(store.boundaries.add(built, [event(thread, f"done-{attempt}")]))

    workers = [threading.Thread(target=add, args=(i,)) for i in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    stored = store.boundaries.list(thread)
    assert len(stored) == 1
    assert results == stored * 6
    assert len(store.events.read(thread)) == 1
