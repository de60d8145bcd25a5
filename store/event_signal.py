"""New events of threads, for everyone in a process who follows threads: the API's streams
and long polls (api/event_feed.py) and the Python client's `tail_events`
(docs/event-stream.md).

Every subscriber waits in one `Waiters` book per feed; only what wakes it differs:

- PostgreSQL (`ListeningFeed`): `insert_events` NOTIFYs `weft_events` with "<thread> <last
  sequence>" inside the writing transaction, so it is delivered at commit. One LISTEN
  connection per feed wakes the waiters of that thread.
- SQLite (`PollingFeed`): one thread per feed asks its own connection for `PRAGMA
  data_version` every few milliseconds. The number changes when any other connection, in
  this process or another, commits to the file; it is read from SQLite's shared memory
  without touching a table. Only when it changed does the feed ask for the last sequence of
  every waited-for thread, in one query, and wake the waiters of threads that advanced.
- Both run a safety-net query every `poll_interval` while someone waits, so a lost
  notification (or a change signal that failed) delays an event to that poll, no longer.

A woken waiter always reads its events from the store: a wake-up is a hint and the store is
the truth, so a lost or extra hint costs latency or a read, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from weft.contract.events import Event
from weft.store.events import EVENTS_CHANNEL
from weft.store.store import Store
from weft.store.urls import SQLITE_BUSY_TIMEOUT_MS

# The most events one wait returns; a caller that got this many asks again from the last.
READ_LIMIT = 500
# How often the SQLite feed asks `PRAGMA data_version` while someone waits, in seconds: about
# 5 µs of SQLite and one thread wake-up each (under 1 % of a core), and half of it on average
# added to an event's delivery.
CHECK_INTERVAL = 0.005
# A store without a file (`:memory:`) has no change signal another connection can read: its
# feed runs the events query at this interval instead.
_MEMORY_CHECK_INTERVAL = 0.05
# The safety net: while someone waits, the events query runs at least this often, whatever
# the change signal or the notifications said.
POLL_INTERVAL = 1.0
# The SQLite watcher lingers this long after the last waiter left before its thread ends,
# so a follower that reads between waits does not start a thread per event.
_LINGER_SECONDS = 2.0
# A LISTEN connection quiet this long is asked `SELECT 1`, so a dead one is noticed.
_LIVENESS_SECONDS = 30.0
# Reconnecting the LISTEN connection waits this long at first, doubling up to the maximum.
_BACKOFF_SECONDS = (0.1, 5.0)

log = logging.getLogger(__name__)


@dataclass(eq=False)
class _Waiter:
    thread_id: str
    after: int
    woken: asyncio.Event = field(default_factory=asyncio.Event)


class Waiters:
    """The subscribers waiting on one feed, by thread, with their cursors.

    Waiters of a thread that ask for the same cursor share one store read, so a new event
    seen by a thousand subscribers at the same place costs one query, not a thousand. A
    read is shared only within an epoch: every wake-up of a thread starts a new one, so a
    waiter woken by a commit never joins a read that began before that commit.
    """

    def __init__(self, store: Store, *, on_wait: Callable[[], None] = lambda: None) -> None:
        self._store = store
        self._on_wait = on_wait
        self._by_thread: dict[str, set[_Waiter]] = {}
        # Epochs come from one counter, so a thread waited on again never reuses one.
        self._epochs: dict[str, int] = {}
        self._clock = itertools.count(1)
        self._reads: dict[tuple[str, int, int], asyncio.Future[list[Event]]] = {}
        self.closed = False
        self.reads = 0  # store reads made (a shared read counts once)
        # The waited-for threads, replaced (never changed) when they change: a watcher
        # thread reads it without a lock.
        self.snapshot: tuple[str, ...] = ()

    def __len__(self) -> int:
        return sum(len(waiters) for waiters in self._by_thread.values())

    def threads(self) -> list[str]:
        """The threads someone waits on."""
        return list(self._by_thread)

    async def wait(self, thread_id: str, after: int, timeout: float) -> list[Event]:
        """The thread's events after `after` once there are any, or `[]` after `timeout`."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(timeout, 0.0)
        waiter = self._add(thread_id, after)
        try:
            while True:
                waiter.woken.clear()  # before reading: a commit seen during the read wakes again
                batch = await self._read(thread_id, after)
                if batch or self.closed or loop.time() >= deadline:
                    return batch
                # On timeout the loop reads once more: the store has the last word.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout_at(deadline):  # no task per wait, unlike wait_for
                        await waiter.woken.wait()
        finally:
            self._remove(waiter)

    def wake(self, thread_id: str, last: int) -> None:
        """The thread's events up to `last` are committed: wake its waiters behind that."""
        waiters = self._by_thread.get(thread_id)
        if not waiters:
            return
        self._epochs[thread_id] = next(self._clock)
        for waiter in waiters:
            if waiter.after < last:
                waiter.woken.set()

    def wake_all(self) -> None:
        """Wake every waiter to read the store again (notifications may have been lost)."""
        for thread_id, waiters in self._by_thread.items():
            self._epochs[thread_id] = next(self._clock)
            for waiter in waiters:
                waiter.woken.set()

    def close(self) -> None:
        """Release every waiter with what the store holds now; later waits read once."""
        self.closed = True
        self.wake_all()

    def _add(self, thread_id: str, after: int) -> _Waiter:
        waiter = _Waiter(thread_id, after)
        if thread_id not in self._by_thread:
            self._by_thread[thread_id] = set()
            self._epochs[thread_id] = next(self._clock)
            self.snapshot = tuple(self._by_thread)
        self._by_thread[thread_id].add(waiter)
        self._on_wait()
        return waiter

    def _remove(self, waiter: _Waiter) -> None:
        waiters = self._by_thread[waiter.thread_id]
        waiters.discard(waiter)
        if not waiters:
            del self._by_thread[waiter.thread_id]
            del self._epochs[waiter.thread_id]
            self.snapshot = tuple(self._by_thread)

    async def _read(self, thread_id: str, after: int) -> list[Event]:
        key = (thread_id, after, self._epochs[thread_id])
        shared = self._reads.get(key)
        if shared is None:
            shared = asyncio.ensure_future(
                asyncio.to_thread(self._store.events.read, thread_id, after=after, limit=READ_LIMIT)
            )
            self._reads[key] = shared
            self.reads += 1
            shared.add_done_callback(lambda done: self._forget(key, done))
        # Shielded: a subscriber that leaves must not cancel the read others wait on.
        return list(await asyncio.shield(shared))

    def _forget(self, key: tuple[str, int, int], done: asyncio.Future[list[Event]]) -> None:
        if self._reads.get(key) is done:
            del self._reads[key]
        if not done.cancelled():
            done.exception()  # retrieved: the waiters that awaited it have raised it


class _Advances:
    """The last sequence each waited-for thread had at the previous query: only a thread
    that advanced since wakes (each waiter read the store once when it began waiting)."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def advanced(self, threads: Iterable[str], lasts: dict[str, int]) -> dict[str, int]:
        seen, self._seen = self._seen, {thread_id: lasts.get(thread_id, 0) for thread_id in threads}
        return {t: last for t, last in self._seen.items() if last > seen.get(t, 0)}

    def clear(self) -> None:
        self._seen = {}


class PollingFeed:
    """SQLite: one watcher thread per feed asks `PRAGMA data_version` every `check_interval`
    while someone waits, and runs the events query only when the file changed (or every
    `poll_interval`, the safety net)."""

    def __init__(
        self,
        store: Store,
        poll_interval: float = POLL_INTERVAL,
        *,
        check_interval: float = CHECK_INTERVAL,
    ) -> None:
        self.store = store  # the store it follows
        database = store.engine.url.database or ""
        self._path = None if database in ("", ":memory:") else database
        self._check = check_interval
        self._safety = poll_interval
        self._waiters = Waiters(store, on_wait=self._start_watching)
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self.checks = 0  # change signals read
        self.polls = 0  # events queries run (on a change, or the safety net)
        self.pollers_started = 0  # times the watcher (re)started after an idle spell

    @property
    def waiting(self) -> int:
        """Subscribers waiting now."""
        return len(self._waiters)

    @property
    def reads(self) -> int:
        """Store reads made for waiters (shared reads count once)."""
        return self._waiters.reads

    async def wait_for_events(self, thread_id: str, after: int, timeout: float) -> list[Event]:
        """See `EventFeed.wait_for_events`."""
        return await self._waiters.wait(thread_id, after, timeout)

    async def close(self) -> None:
        """Stop the watcher and release the waiters."""
        self._waiters.close()
        self._stop.set()
        watcher = self._watcher
        if watcher is not None:
            await asyncio.to_thread(watcher.join)

    def _start_watching(self) -> None:
        with self._lock:
            if self._watcher is not None or self._waiters.closed:
                return
            self.pollers_started += 1
            loop = asyncio.get_running_loop()
            self._watcher = threading.Thread(
                target=self._watch, args=(loop,), name="weft-event-feed", daemon=True
            )
            self._watcher.start()

    def _watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """The watcher thread: the change signal, the events query when it moved."""
        connection = self._signal_connection()
        try:
            advances = _Advances()  # this run's: a watcher started after it keeps its own
            version: object = None
            next_poll = 0.0
            idle_since: float | None = None
            while not self._stop.wait(
                self._check if connection else max(self._check, _MEMORY_CHECK_INTERVAL)
            ):
                threads = self._waiters.snapshot
                now = time.monotonic()
                if not threads:
                    idle_since = idle_since or now
                    with self._lock:
                        if now - idle_since >= _LINGER_SECONDS and not self._waiters.snapshot:
                            self._watcher = None
                            return
                    continue
                idle_since = None
                current = self._data_version(connection)
                if current is None and connection is not None:
                    connection.close()  # polling from now on: no signal, no spin
                    connection = None
                self.checks += 1
                if current is not None and current == version and now < next_poll:
                    continue
                # The version is read before the query: a commit after it changes the version
                # again, so the next check runs the query once more.
                version, next_poll = current, now + self._safety
                if not self._poll(loop, threads, advances):
                    return
        finally:
            if connection is not None:
                connection.close()
            with self._lock:
                if self._watcher is threading.current_thread():
                    self._watcher = None

    def _poll(
        self, loop: asyncio.AbstractEventLoop, threads: tuple[str, ...], advances: _Advances
    ) -> bool:
        """The events query, its advances handed to the loop; False once the loop is gone."""
        try:
            lasts = self.store.events.last_sequences(threads)
        except Exception:  # the store may be busy or away; the next check asks again
            log.warning("event feed: polling the store failed", exc_info=True)
            return True
        self.polls += 1
        advanced = advances.advanced(threads, lasts)
        if advanced:
            try:
                loop.call_soon_threadsafe(self._wake, advanced)
            except RuntimeError:  # the loop closed under a follower that never left
                return False
        return True

    def _wake(self, advanced: dict[str, int]) -> None:
        for thread_id, last in advanced.items():
            self._waiters.wake(thread_id, last)

    def _signal_connection(self) -> sqlite3.Connection | None:
        if self._path is None:
            return None
        try:
            connection = sqlite3.connect(
                self._path,
                timeout=SQLITE_BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,  # autocommit: never holds a read transaction open
                check_same_thread=False,
            )
        except sqlite3.Error:
            log.warning("event feed: no change signal; polling instead", exc_info=True)
            return None
        return connection

    @staticmethod
    def _data_version(connection: sqlite3.Connection | None) -> object:
        """What changes when another connection commits to the file; None without a signal
        (no file, or it failed), which runs the query at every check."""
        if connection is None:
            return None
        try:
            row = connection.execute("PRAGMA data_version").fetchone()
        except sqlite3.Error:
            log.warning("event feed: PRAGMA data_version failed; polling", exc_info=True)
            return None
        return row[0]


class ListeningFeed:
    """PostgreSQL: one LISTEN connection wakes the waiters of each thread a commit told of;
    a query every `poll_interval` while someone waits is the safety net.

    Opened with `open`, it listens for its whole life (`weft serve`); made with a `linger`
    (the client's `shared_feed`), it listens only while someone waits, and that long after.
    """

    def __init__(
        self, store: Store, poll_interval: float = POLL_INTERVAL, *, linger: float | None = None
    ) -> None:
        url = store.engine.url.set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
        self.store = store  # the store it follows
        self._safety = poll_interval
        self._linger = linger
        self._waiters = Waiters(store, on_wait=self._on_wait)
        self._task: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._advances = _Advances()
        self.backend_pid: int | None = None  # the listening session, for tests and drills
        self.notifications = 0  # notifications received
        self.reconnects = 0  # times the LISTEN connection was lost and made again
        self.polls = 0  # safety-net queries run

    @property
    def waiting(self) -> int:
        """Subscribers waiting now."""
        return len(self._waiters)

    @property
    def reads(self) -> int:
        """Store reads made for waiters (shared reads count once)."""
        return self._waiters.reads

    @classmethod
    async def open(cls, store: Store, poll_interval: float = POLL_INTERVAL) -> ListeningFeed:
        """Listen at once (so `open` fails when PostgreSQL does), then keep listening."""
        feed = cls(store, poll_interval)
        connection = await feed._listen()
        feed._task = asyncio.create_task(feed._run(connection))
        return feed

    async def wait_for_events(self, thread_id: str, after: int, timeout: float) -> list[Event]:
        """See `EventFeed.wait_for_events`."""
        return await self._waiters.wait(thread_id, after, timeout)

    async def close(self) -> None:
        """Stop listening and polling, and release the waiters."""
        self._waiters.close()
        for task in (self._task, self._poller):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _on_wait(self) -> None:
        if self._waiters.closed:
            return
        if self._poller is None:
            self._poller = asyncio.create_task(self._poll())
        if self._task is None:  # a lingering feed that stopped listening: listen again
            self._task = asyncio.create_task(self._run(None))

    async def _poll(self) -> None:
        try:
            while self._waiters:
                await asyncio.sleep(self._safety)
                threads = self._waiters.threads()
                if not threads:
                    continue
                try:
                    lasts = await asyncio.to_thread(self.store.events.last_sequences, threads)
                except Exception:  # the store may be away; the next poll asks again
                    log.warning("event feed: the safety-net poll failed", exc_info=True)
                    continue
                self.polls += 1
                for thread_id, last in self._advances.advanced(threads, lasts).items():
                    self._waiters.wake(thread_id, last)
        finally:
            self._poller = None
            self._advances.clear()

    async def _listen(self) -> psycopg.AsyncConnection[Any]:
        connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        try:
            await connection.execute(f"LISTEN {EVENTS_CHANNEL}")
        except BaseException:
            await connection.close()
            raise
        self.backend_pid = connection.info.backend_pid
        return connection

    async def _run(self, connection: psycopg.AsyncConnection[Any] | None) -> None:
        try:
            if connection is None:
                connection = await self._reconnect(first=True)
                if connection is None:
                    return
                # Listening now: one more read catches what committed before.
                self._waiters.wake_all()
            while True:
                try:
                    await self._receive(connection)
                    return  # nobody waited for a while
                except Exception:
                    log.warning("event feed: the LISTEN connection failed", exc_info=True)
                await connection.close()
                self._waiters.wake_all()  # the store may hold what was committed meanwhile
                if self._idle():
                    return
                connection = await self._reconnect()
                if connection is None:
                    return
                self.reconnects += 1
                # Listening again: one more read catches what committed while nobody listened.
                self._waiters.wake_all()
        finally:
            self._task = None
            if connection is not None:
                await connection.close()

    def _idle(self) -> bool:
        """Whether a lingering feed has nobody to listen for."""
        return self._linger is not None and not self._waiters

    async def _receive(self, connection: psycopg.AsyncConnection[Any]) -> None:
        """Notifications to waiters until a lingering feed has been idle `linger` seconds."""
        quiet = _LIVENESS_SECONDS if self._linger is None else min(self._linger, _LIVENESS_SECONDS)
        idle_since: float | None = None
        while True:
            async for notify in connection.notifies(timeout=quiet):
                self.notifications += 1
                thread_id, _, last = notify.payload.rpartition(" ")
                if last.isdigit():
                    self._waiters.wake(thread_id, int(last))
            if self._idle():
                now = time.monotonic()
                idle_since = idle_since or now
                if self._linger is not None and now - idle_since >= self._linger:
                    return
            else:
                idle_since = None
            await connection.execute("SELECT 1")  # a quiet spell: is the session still there?

    async def _reconnect(self, *, first: bool = False) -> psycopg.AsyncConnection[Any] | None:
        """A listening connection; None once a lingering feed has nobody left to wait."""
        delay, most = _BACKOFF_SECONDS
        while True:
            if not first:
                await asyncio.sleep(delay)
            first = False
            if self._idle():
                return None
            try:
                return await self._listen()
            except Exception:
                log.warning("event feed: PostgreSQL refused LISTEN; retrying", exc_info=True)
                delay = min(delay * 2, most)


Feed = PollingFeed | ListeningFeed


async def open_event_feed(
    store: Store,
    *,
    poll_interval: float = POLL_INTERVAL,
    check_interval: float = CHECK_INTERVAL,
) -> Feed:
    """The feed for `store`: pushed on PostgreSQL, a change signal checked every
    `check_interval` seconds on SQLite; on both a safety-net query every `poll_interval`
    seconds while someone waits."""
    if store.engine.dialect.name == "postgresql":
        return await ListeningFeed.open(store, poll_interval)
    return PollingFeed(store, poll_interval, check_interval=check_interval)


# The feeds `shared_feed` made, by event loop (a loop gone takes its feeds with it) and store.
_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[int, Feed]] = (
    weakref.WeakKeyDictionary()
)


def shared_feed(store: Store) -> Feed:
    """The process's feed for `store` on the running event loop, opened at first use: every
    follower of a thread in this process (`tail_events`) waits in it, so they share one
    watcher, one LISTEN connection and the reads of one thread at one cursor."""
    by_store = _SHARED.setdefault(asyncio.get_running_loop(), {})
    feed = by_store.get(id(store))
    if feed is None or feed.store is not store:
        # Nothing runs until someone waits, and nothing after: a follower never has to close it.
        if store.engine.dialect.name == "postgresql":
            feed = ListeningFeed(store, linger=_LINGER_SECONDS)
        else:
            feed = PollingFeed(store)
        by_store[id(store)] = feed
    return feed


__all__ = [
    "CHECK_INTERVAL",
    "POLL_INTERVAL",
    "READ_LIMIT",
    "Feed",
    "ListeningFeed",
    "PollingFeed",
    "Waiters",
    "open_event_feed",
    "shared_feed",
]
