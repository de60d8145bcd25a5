"""The store's event feed (store/event_signal.py) behind the API's streams and the Python
client's `tail_events`: SQLite's change signal runs the events query only when the file
changed, a real worker's writes reach followers through the signal (no safety-net poll) on
SQLite and PostgreSQL, a missed signal still delivers at the safety-net poll, and the
followers of a process share one feed."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support import StartWorker, add_script, agent_definitions, start_thread
from temporalio.client import Client

from weft.api.event_feed import ListeningFeed, PollingFeed, open_event_feed
from weft.client.threads import tail_events
from weft.contract.events import Event
from weft.contract.thread import SIGNAL_QUEUE_MESSAGE, SIGNAL_TERMINATE
from weft.store import Store
from weft.store.event_signal import shared_feed
from weft.store.tables import events as events_table
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

# A safety net no test outwaits: what such a feed delivers, its change signal delivered.
NEVER = 3600.0


def _event(thread_id: str, sequence: int | None = None) -> Event:
    return Event(
        type="test.ping",
        event_id=f"evt-{uuid.uuid4().hex}",
        timestamp="2025-11-21T10:00:00.000Z",
        thread_id=thread_id,
        sequence=sequence,
    )


def _thread() -> str:
    return f"thread-{uuid.uuid4().hex[:12]}"


async def _until(condition: Callable[[], bool], what: str) -> None:
    for _ in range(1500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


def _watchers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "weft-event-feed")


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    yield store
    store.close()


@pytest.fixture
async def quiet_feed(sqlite_store: Store) -> AsyncIterator[PollingFeed]:
    feed = await open_event_feed(sqlite_store, poll_interval=NEVER)
    assert isinstance(feed, PollingFeed)
    yield feed
    await feed.close()


async def test_sqlite_feed_queries_events_only_when_the_file_changed(tmp_path, quiet_feed):
    """Forty waiters on silent threads: the watcher reads the change signal over and over
    but runs the events query once (when it starts); a commit by another connection (another
    Store on the same file, as a worker's would be) runs it once more and wakes its thread's
    waiter."""
    threads = [_thread() for _ in range(40)]
    before = _watchers()  # other tests' feeds may linger
    waits = [asyncio.create_task(quiet_feed.wait_for_events(t, 0, 60)) for t in threads]
    await _until(lambda: quiet_feed.waiting == 40 and quiet_feed.checks >= 30, "checks")
    assert quiet_feed.polls == 1 and quiet_feed.pollers_started == 1
    assert _watchers() <= before + 1

    with Store.open(f"sqlite:///{tmp_path / 'weft.db'}", migrate=False) as writer:
        await asyncio.to_thread(writer.events.append, [_event(threads[7])])
    (got,) = await asyncio.wait_for(waits[7], 30)
    assert got.sequence == 1 and got.thread_id == threads[7]
    assert 2 <= quiet_feed.polls <= 3  # the commit's query (its checkpoint may add one)
    assert not any(w.done() for w in waits[:7] + waits[8:])
    for wait in waits:
        wait.cancel()
    await _until(lambda: quiet_feed.waiting == 0, "the waiters gone")


async def test_sqlite_feed_falls_back_to_the_safety_net(sqlite_store, monkeypatch):
    """A change signal that never moves (a missed signal) delays an event to the next
    safety-net query, no longer."""
    monkeypatch.setattr(PollingFeed, "_data_version", staticmethod(lambda _connection: 1))
    feed = await open_event_feed(sqlite_store, poll_interval=0.2)
    assert isinstance(feed, PollingFeed)
    try:
        thread = _thread()
        wait = asyncio.create_task(feed.wait_for_events(thread, 0, 60))
        await _until(lambda: feed.polls >= 1 and feed.reads == 1, "waiting")
        polls = feed.polls
        await asyncio.to_thread(sqlite_store.events.append, [_event(thread)])
        assert [e.sequence for e in await asyncio.wait_for(wait, 30)] == [1]
        assert feed.polls > polls
    finally:
        await feed.close()


async def test_postgres_feed_falls_back_to_the_safety_net(postgres_databases):
    """An event stored without a notification (a row written behind the store's back, as a
    lost NOTIFY would leave it) reaches its waiter at the safety-net query."""
    url = postgres_databases()
    reader, writer = Store.open(url), Store.open(url, migrate=False)
    feed = await open_event_feed(reader, poll_interval=0.2)
    assert isinstance(feed, ListeningFeed)
    try:
        thread = _thread()
        wait = asyncio.create_task(feed.wait_for_events(thread, 0, 60))
        await _until(lambda: feed.reads == 1, "waiting")
        event = _event(thread, sequence=1)
        row = {
            "thread_id": thread,
            "sequence": 1,
            "event_id": event.event_id,
            "type": event.type,
            "timestamp": event.timestamp,
            "data": event.to_wire(),
        }
        with writer.engine.begin() as connection:
            connection.execute(events_table.insert(), [row])
        assert [e.event_id for e in await asyncio.wait_for(wait, 30)] == [event.event_id]
        assert feed.notifications == 0 and feed.polls >= 1
    finally:
        await feed.close()
        reader.close()
        writer.close()


async def test_followers_in_a_process_share_one_feed(sqlite_store):
    """Thirty `tail_events` followers of ten threads wait in one feed with one watcher
    thread; a commit costs one events query, not one per follower, and reaches every
    follower of its thread."""
    threads = [_thread() for _ in range(10)]
    before = _watchers()  # other tests' feeds may linger
    seen: dict[str, list[list[int]]] = {t: [] for t in threads}

    async def follow(thread_id: str) -> None:
        got: list[int] = []
        seen[thread_id].append(got)
        async for event in tail_events(sqlite_store, thread_id):
            got.append(event.sequence or 0)

    followers = [asyncio.create_task(follow(threads[i % 10])) for i in range(30)]
    feed = shared_feed(sqlite_store)
    assert isinstance(feed, PollingFeed)
    try:
        await _until(lambda: feed.waiting == 30, "all following")
        assert shared_feed(sqlite_store) is feed and _watchers() <= before + 1
        polls = feed.polls
        await asyncio.to_thread(sqlite_store.events.append, [_event(threads[3])])
        await _until(lambda: all(got == [1] for got in seen[threads[3]]), "delivered")
        assert feed.polls - polls <= 2  # one query for the commit (a checkpoint may add one)
        assert all(got == [] for t in threads if t != threads[3] for got in seen[t])
        assert feed.pollers_started == 1
    finally:
        for follower in followers:
            follower.cancel()
        await asyncio.gather(*followers, return_exceptions=True)


async def test_tail_events_stops_when_told(sqlite_store):
    """A follower given `stop` returns once it is set, after what the store holds."""
    thread, stop = _thread(), asyncio.Event()
    sqlite_store.events.append([_event(thread)])
    got: list[int] = []

    async def follow() -> None:
        async for event in tail_events(sqlite_store, thread, stop=stop):
            got.append(event.sequence or 0)

    follower = asyncio.create_task(follow())
    feed = shared_feed(sqlite_store)
    await _until(lambda: got == [1] and feed.waiting == 1, "following")
    await asyncio.to_thread(sqlite_store.events.append, [_event(thread)])
    stop.set()
    await asyncio.wait_for(follower, 30)
    assert got == [1, 2]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_worker_write_reaches_followers_through_the_signal(
    backend: str,
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    weft_config: WeftConfig,
    postgres_databases: Callable[[], str],
) -> None:
    """A real worker streams a reply; a feed of another Store on the same database, with no
    safety net, delivers the first `model.delta` while the reply still streams (the signal
    woke it), and the Python stream (`tail_events`) of that Store delivers it too."""
    if backend == "postgres":
        weft_config.store.url = postgres_databases()
    reply: dict[str, Any] = {"text": "x" * 64, "chunk_size": 4, "chunk_delay_ms": 100}
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [reply]}))
    )
    reader = Store.open(weft_config.store_url(), migrate=False)
    feed = await open_event_feed(reader, poll_interval=NEVER)
    try:
        handle = await start_thread(temporal_client, worker.task_queue)
        stream: list[Event] = []

        async def follow() -> None:
            async for event in tail_events(reader, handle.id):
                stream.append(event)
                if event.type == "model.delta":
                    return

        follower = asyncio.create_task(follow())
        # Wait in the feed from the thread's last event until a model.delta arrives.
        cursor, delta = 0, None
        await handle.signal(SIGNAL_QUEUE_MESSAGE, {"role": "user", "content": "talk"})
        while delta is None:
            batch = await asyncio.wait_for(feed.wait_for_events(handle.id, cursor, 60), 90)
            assert batch, "the feed's wait ended with nothing: the signal never woke it"
            cursor = batch[-1].sequence or cursor
            delta = next((e for e in batch if e.type == "model.delta"), None)
        # Delivered while the reply streams (16 chunks 100 ms apart): the turn is not over.
        assert not reader.events.read(handle.id, types=["model.completed"])
        await asyncio.wait_for(follower, 60)
        assert stream[-1].type == "model.delta"
        await handle.signal(SIGNAL_TERMINATE, {})
    finally:
        await feed.close()
        reader.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_shared_feed_runs_only_while_someone_follows(
    backend: str,
    tmp_path: Path,
    postgres_databases: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client's feed needs no closing: once its last follower left (and a linger passed)
    its watcher thread or LISTEN connection ends; a new follower starts it again and is
    served."""
    monkeypatch.setattr("weft.store.event_signal._LINGER_SECONDS", 0.2)
    url = postgres_databases() if backend == "postgres" else f"sqlite:///{tmp_path / 'w.db'}"
    with Store.open(url) as store:
        thread = _thread()
        feed = shared_feed(store)

        def running() -> bool:
            if isinstance(feed, PollingFeed):
                return feed._watcher is not None
            return feed.backend_pid is not None and feed._task is not None

        for sequence in (1, 2):
            follower = tail_events(store, thread, after=sequence - 1)
            assert isinstance(follower, AsyncGenerator)
            got = asyncio.ensure_future(anext(follower))
            await _until(lambda: feed.waiting == 1 and running(), "following")
            await asyncio.to_thread(store.events.append, [_event(thread)])
            assert (await asyncio.wait_for(got, 30)).sequence == sequence
            await follower.aclose()
            await _until(lambda: not running(), "stopped after the linger")


async def test_a_store_without_a_file_is_polled() -> None:
    """`:memory:` has no change signal another connection could read: the feed runs the
    events query at every (slower) check instead, and still delivers."""
    with Store.open("sqlite://") as store:
        feed = await open_event_feed(store, poll_interval=NEVER)
        assert isinstance(feed, PollingFeed)
        try:
            thread = _thread()
            wait = asyncio.create_task(feed.wait_for_events(thread, 0, 60))
            await _until(lambda: feed.polls >= 2, "polling")
            await asyncio.to_thread(store.events.append, [_event(thread)])
            assert [e.sequence for e in await asyncio.wait_for(wait, 30)] == [1]
        finally:
            await feed.close()
