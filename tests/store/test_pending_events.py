"""PendingEvents and DeltaBatcher: a call's start events wait for its final write, for at
most the interval, and never land out of order (activities/pending_events.py)."""

from __future__ import annotations

import asyncio
import time

import pytest
from store_factories import event, new_thread_id

from weft.activities.pending_events import PendingEvents
from weft.activities.providers import Delta
from weft.activities.streaming import DeltaBatcher, delta_event
from weft.contract.events import Event
from weft.store import Store
from weft.store.events import changes_rows


def _ids(store: Store, thread: str) -> list[str]:
    return [e.event_id for e in store.events.read(thread)]


async def test_a_quick_call_leaves_its_events_to_the_final_write(sqlite_store: Store) -> None:
    thread = new_thread_id()
    async with PendingEvents(sqlite_store, [event(thread, "a"), event(thread, "b")]) as pending:
        owed = await pending.take()
    await asyncio.sleep(0.25)  # past the interval: the timer was stopped, nothing written
    assert [e.event_id for e in owed] == ["a", "b"]
    assert _ids(sqlite_store, thread) == []


async def test_a_slow_call_has_its_events_stored_within_the_interval(sqlite_store: Store) -> None:
    thread = new_thread_id()
    async with PendingEvents(sqlite_store, [event(thread, "a")], within=0.05) as pending:
        deadline = time.monotonic() + 5
        while _ids(sqlite_store, thread) != ["a"]:
            assert time.monotonic() < deadline, "the start event was never stored"
            await asyncio.sleep(0.01)
        pending.add([event(thread, "b")])
        assert [e.event_id for e in await pending.take()] == ["b"]


async def test_flush_writes_what_is_owed_before_the_callers_own_write(sqlite_store: Store) -> None:
    """A tool's own event goes in after the call's start events (ThreadState._write)."""
    thread = new_thread_id()
    async with PendingEvents(sqlite_store, [event(thread, "started")]) as pending:
        assert [e.event_id for e in await pending.flush()] == ["started"]
        assert await pending.flush() == []  # nothing twice
        sqlite_store.events.append([event(thread, "emitted")])
        assert await pending.take() == []
    assert _ids(sqlite_store, thread) == ["started", "emitted"]


async def test_take_waits_for_a_write_under_way(
    sqlite_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The timer's write finishes before `take` returns, so the final write comes after."""
    thread = new_thread_id()
    append = sqlite_store.events.append

    def slow_append(events):  # the timer's write, still running when take is called
        time.sleep(0.3)
        return append(events)

    monkeypatch.setattr(sqlite_store.events, "append", slow_append)
    async with PendingEvents(sqlite_store, [event(thread, "a")], within=0.01) as pending:
        await asyncio.sleep(0.1)  # the write has begun
        assert await pending.take() == []
        assert _ids(sqlite_store, thread) == ["a"]


async def test_a_failed_attempt_still_stores_what_it_owed(sqlite_store: Store) -> None:
    thread = new_thread_id()
    with pytest.raises(RuntimeError, match="provider broke"):
        async with PendingEvents(sqlite_store, [event(thread, "requested")]):
            raise RuntimeError("provider broke")
    assert _ids(sqlite_store, thread) == ["requested"]


async def test_events_added_after_the_final_write_are_refused(sqlite_store: Store) -> None:
    thread = new_thread_id()
    async with PendingEvents(sqlite_store, [event(thread, "a")]) as pending:
        await pending.take()
        with pytest.raises(RuntimeError, match="after the final write"):
            pending.add([event(thread, "late")])


async def test_a_quick_stream_is_stored_with_its_start_events(sqlite_store: Store) -> None:
    """Batches within the interval join the start events in `take`, in order."""
    thread = new_thread_id()

    def make(
        n: int, text: str, kind: str, index: int | None = None, call_id: str | None = None
    ) -> Event:
        kind_, payload = delta_event(kind, text, 1)
        return event(thread, f"delta{n}", kind_, payload=payload)

    batcher = DeltaBatcher(sqlite_store, make, interval=10, lead=[event(thread, "requested")])
    async with batcher:
        await batcher.add(Delta(kind="text", text="Hel"))
        await batcher.add(Delta(kind="text", text="lo"))
        owed = await batcher.take()
    assert [e.event_id for e in owed] == ["requested", "delta1"]
    assert owed[1].payload["text"] == "Hello"
    assert _ids(sqlite_store, thread) == []


def test_events_that_change_rows_are_told_apart() -> None:
    """A step stores these first (a tool may read the rows they change); the rest may wait."""
    thread = new_thread_id()
    for kind in ("subagent.started", "job.cancelled", "limit.changed", "queue.changed"):
        assert changes_rows([event(thread, "a"), event(thread, "b", kind)]), kind
    assert not changes_rows([event(thread, "a", "tool.started"), event(thread, "b", "run.status")])
