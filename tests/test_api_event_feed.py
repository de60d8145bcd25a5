"""The API's event feed on real stores: pushed by PostgreSQL NOTIFY (and surviving a dropped
LISTEN connection), watched by one shared thread on SQLite that wakes only the threads that
advanced (here with a 10 ms safety net, so it queries at every tick)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from weft.api.event_feed import ListeningFeed, PollingFeed, open_event_feed
from weft.contract.events import Event
from weft.store import Store


def _event(thread_id: str) -> Event:
    return Event(
        type="test.ping",
        event_id=f"evt-{uuid.uuid4().hex}",
        timestamp="2025-11-21T10:00:00.000Z",
        thread_id=thread_id,
    )


def _thread() -> str:
    return f"thread-{uuid.uuid4().hex[:12]}"


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(1200):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    yield store
    store.close()


@pytest.fixture
async def polling_feed(sqlite_store: Store) -> AsyncIterator[PollingFeed]:
    feed = await open_event_feed(sqlite_store, poll_interval=0.01)
    assert isinstance(feed, PollingFeed)
    yield feed
    await feed.close()


@pytest.fixture
def postgres_url(postgres_databases: Callable[[], str]) -> str:
    return postgres_databases()


async def test_poller_wakes_only_the_threads_that_advanced(sqlite_store, polling_feed):
    """One query a tick covers every waited-for thread; a waiter whose thread did not move is
    not woken (it reads the store only when it starts waiting)."""
    quiet, busy = _thread(), _thread()
    sqlite_store.events.append([_event(quiet), _event(busy)])
    quiet_wait = asyncio.create_task(polling_feed.wait_for_events(quiet, 1, 60))
    busy_wait = asyncio.create_task(polling_feed.wait_for_events(busy, 1, 60))
    await _until(lambda: polling_feed.reads == 2 and polling_feed.polls >= 2, "both waiting")

    (written,) = sqlite_store.events.append([_event(busy)])
    assert [e.sequence for e in await busy_wait] == [written.sequence] == [2]
    assert polling_feed.reads == 3  # the busy waiter's read after its wake-up, no other
    polls = polling_feed.polls
    await _until(lambda: polling_feed.polls >= polls + 5, "more polls")
    assert polling_feed.reads == 3 and not quiet_wait.done()
    assert polling_feed.pollers_started == 1

    quiet_wait.cancel()
    await _until(lambda: polling_feed.waiting == 0, "the cancelled waiter gone")
    await asyncio.sleep(0.05)
    polls = polling_feed.polls
    await asyncio.sleep(0.1)
    assert polling_feed.polls == polls  # nobody waits: the poller stopped
    # A new waiter starts it again; an event already stored is returned at once.
    assert [e.sequence for e in await polling_feed.wait_for_events(quiet, 0, 60)] == [1]


async def test_one_poller_and_one_read_for_many_waiters(sqlite_store, polling_feed):
    """A hundred waiters of one thread and fifty of others share the poller's query, and the
    waiters at one cursor share the read a new event needs."""
    thread = _thread()
    others = [_thread() for _ in range(50)]
    waits = [
        asyncio.create_task(polling_feed.wait_for_events(thread, 0, 60)) for _ in range(100)
    ] + [asyncio.create_task(polling_feed.wait_for_events(t, 0, 60)) for t in others]
    await _until(lambda: polling_feed.waiting == 150 and polling_feed.polls >= 1, "waiting")
    reads = polling_feed.reads

    sqlite_store.events.append([_event(thread)])
    results = await asyncio.gather(*waits[:100])
    assert all([e.sequence for e in batch] == [1] for batch in results)
    assert polling_feed.reads - reads < 10  # one shared read, not a hundred
    assert polling_feed.pollers_started == 1
    for wait in waits[100:]:
        wait.cancel()


async def test_close_releases_waiters(sqlite_store, polling_feed):
    thread = _thread()
    wait = asyncio.create_task(polling_feed.wait_for_events(thread, 0, 600))
    await _until(lambda: polling_feed.waiting == 1, "waiting")
    await polling_feed.close()
    assert await wait == []
    assert polling_feed.waiting == 0


async def _listening_feed(store: Store) -> ListeningFeed:
    # A poll interval no test could outwait: whatever arrives was pushed.
    feed = await open_event_feed(store, poll_interval=3600)
    assert isinstance(feed, ListeningFeed)
    return feed


async def test_postgres_feed_is_pushed_by_notify(postgres_url):
    """Events committed by another process's store arrive by NOTIFY: the feed has no poller,
    and the waiter reads the store only twice (when it starts, when it is told)."""
    reader, writer = Store.open(postgres_url), Store.open(postgres_url, migrate=False)
    feed = await _listening_feed(reader)
    try:
        thread = _thread()
        wait = asyncio.create_task(feed.wait_for_events(thread, 0, 60))
        await _until(lambda: feed.reads == 1, "waiting")
        await asyncio.to_thread(writer.events.append, [_event(thread), _event(thread)])
        assert [e.sequence for e in await wait] == [1, 2]
        assert feed.notifications >= 1 and feed.reads == 2
    finally:
        await feed.close()
        reader.close()
        writer.close()


async def test_postgres_feed_survives_a_dropped_listener(postgres_url):
    """`pg_terminate_backend` on the LISTEN session: the feed reconnects and wakes every
    waiter to read the store, so an event committed while nobody listened is not lost."""
    reader, writer = Store.open(postgres_url), Store.open(postgres_url, migrate=False)
    feed = await _listening_feed(reader)
    try:
        thread = _thread()
        wait = asyncio.create_task(feed.wait_for_events(thread, 0, 60))
        await _until(lambda: feed.reads == 1, "waiting")
        dropped = feed.backend_pid
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))
        await asyncio.to_thread(writer.events.append, [_event(thread)])
        assert [e.sequence for e in await wait] == [1]
        await _until(lambda: feed.reconnects == 1, "listening again")
        assert feed.backend_pid != dropped

        # Listening again, the next event is pushed as before.
        notifications = feed.notifications
        wait = asyncio.create_task(feed.wait_for_events(thread, 1, 60))
        await _until(lambda: feed.waiting == 1, "waiting again")
        await asyncio.to_thread(writer.events.append, [_event(thread)])
        assert [e.sequence for e in await wait] == [2]
        assert feed.notifications > notifications
    finally:
        await feed.close()
        reader.close()
        writer.close()
