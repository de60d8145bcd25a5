"""What the worker's metrics read from the store: newly committed events, once each, and
each thread's queue depth projected from its `queue.changed` events."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from store_factories import event, new_thread_id

from weft.contract.events import Event
from weft.store import Store
from weft.store.events import events_by_thread, insert_events
from weft.store.rows import ThreadRow


def _observed(store: Store) -> list[str]:
    seen: list[str] = []

    def observe(events: Sequence[Event]) -> None:
        seen.extend(e.event_id for e in events)

    store.database.events_committed = observe
    return seen


def test_each_event_is_reported_once_after_its_commit(store: Store) -> None:
    """Writing the same events again (a retried activity) reports nothing new; a message
    update that records its event reports it too."""
    thread_id = new_thread_id()
    seen = _observed(store)
    first = [event(thread_id, "a1:done", "tool.result"), event(thread_id, "a1:x", "model.delta")]
    store.events.append(first)
    store.events.append(first)
    store.events.record([], [*first, event(thread_id, "a2:done", "tool.failed")])
    assert seen == ["a1:done", "a1:x", "a2:done"]


def test_a_rolled_back_write_reports_nothing(store: Store) -> None:
    """Events inserted in a transaction that then fails are not reported; the retry that
    commits them is, once."""
    thread_id = new_thread_id()
    seen = _observed(store)
    batch = events_by_thread([event(thread_id, "m:done", "model.completed")])
    with pytest.raises(RuntimeError), store.database.write() as connection:
        insert_events(store.database, connection, batch)
        raise RuntimeError("the write fails after inserting")
    assert seen == []
    with store.database.write() as connection:
        insert_events(store.database, connection, batch)
    assert seen == ["m:done"]


def _queue_changed(thread_id: str, event_id: str, depth: int) -> Event:
    queue = [{"queueId": f"q{i}"} for i in range(depth)]
    return event(thread_id, event_id, "queue.changed", payload={"queue": queue})


def test_queue_depth_follows_the_newest_queue_change(store: Store) -> None:
    """A thread's queue depth is the length of the queue its newest `queue.changed` carries;
    closed threads and other agents are summed apart, and a row upsert keeps the depth."""
    busy, other, closed = new_thread_id(), new_thread_id(), new_thread_id()
    now = datetime.now(UTC)
    for thread_id, agent, status in [
        (busy, "helper", "running"),
        (other, "writer", "waiting_input"),
        (closed, "helper", "cancelled"),
    ]:
        store.threads.upsert(
            ThreadRow(thread_id=thread_id, agent=agent, status=status, created_at=now)
        )
    store.events.append([_queue_changed(busy, "e1", 1), _queue_changed(busy, "e2", 3)])
    store.events.append([_queue_changed(other, "e1", 2), _queue_changed(closed, "e1", 5)])
    assert store.threads.queued_by_agent() == {"helper": 3, "writer": 2}
    store.threads.upsert(
        ThreadRow(thread_id=busy, agent="helper", status="running", created_at=now)
    )
    store.events.append([_queue_changed(other, "e2", 0)])
    assert store.threads.queued_by_agent() == {"helper": 3, "writer": 0}
    row = store.threads.get(busy)
    assert row is not None and row.queue_depth == 3
