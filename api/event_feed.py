"""New events of threads for the API's streams: pushed by PostgreSQL, polled once per process
otherwise (docs/event-stream.md).

Every subscriber waits in one `Waiters` book per feed; only what wakes it differs:

- PostgreSQL (`ListeningFeed`): `insert_events` NOTIFYs `weft_events` with "<thread> <last
  sequence>" inside the writing transaction, so it is delivered at commit. One LISTEN
  connection per feed wakes the waiters of that thread.
- SQLite and anything else (`PollingFeed`): one task asks for the last sequence of every
  waited-for thread in a single query per tick, and runs only while someone waits.

A woken waiter always reads its events from the store: a wake-up is a hint and the store is
the truth, so a lost or extra hint costs latency or a read, never an event.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from weft.api.context import EventFeed
from weft.contract.events import Event
from weft.store import Store
from weft.store.events import EVENTS_CHANNEL

# The most events one wait returns; a caller that got this many asks again from the last.
READ_LIMIT = 500
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
        self._by_thread[thread_id].add(waiter)
        self._on_wait()
        return waiter

    def _remove(self, waiter: _Waiter) -> None:
        waiters = self._by_thread[waiter.thread_id]
        waiters.discard(waiter)
        if not waiters:
            del self._by_thread[waiter.thread_id]
            del self._epochs[waiter.thread_id]

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


class PollingFeed:
    """One poller per process: a query per tick for every waited-for thread, only while
    someone waits."""

    def __init__(self, store: Store, poll_interval: float) -> None:
        self._store = store
        self._interval = poll_interval
        self._waiters = Waiters(store, on_wait=self._start_polling)
        self._task: asyncio.Task[None] | None = None
        self._last_seen: dict[str, int] = {}
        self.polls = 0  # queries the poller ran
        self.pollers_started = 0  # times the poller (re)started after an idle spell

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
        """Stop the poller and release the waiters."""
        await _close(self._waiters, self._task)

    def _start_polling(self) -> None:
        if self._task is None and not self._waiters.closed:
            self.pollers_started += 1
            self._task = asyncio.create_task(self._poll())

    async def _poll(self) -> None:
        try:
            while self._waiters:
                await asyncio.sleep(self._interval)
                threads = self._waiters.threads()
                if threads:
                    await self._tick(threads)
        finally:
            self._task = None
            self._last_seen.clear()

    async def _tick(self, threads: list[str]) -> None:
        try:
            lasts = await asyncio.to_thread(self._store.events.last_sequences, threads)
        except Exception:  # the store may be busy or away; the next tick asks again
            log.warning("event feed: polling the store failed", exc_info=True)
            return
        self.polls += 1
        seen = self._last_seen
        self._last_seen = {thread_id: lasts.get(thread_id, 0) for thread_id in threads}
        for thread_id, last in self._last_seen.items():
            # Only an advance wakes: each waiter read the store once when it began waiting.
            if last > seen.get(thread_id, 0):
                self._waiters.wake(thread_id, last)


class ListeningFeed:
    """PostgreSQL: one LISTEN connection wakes the waiters of each thread a commit told of."""

    def __init__(self, store: Store) -> None:
        url = store.engine.url.set(drivername="postgresql")
        self._conninfo = url.render_as_string(hide_password=False)
        self._waiters = Waiters(store)
        self._task: asyncio.Task[None] | None = None
        self.backend_pid: int | None = None  # the listening session, for tests and drills
        self.notifications = 0  # notifications received
        self.reconnects = 0  # times the LISTEN connection was lost and made again

    @property
    def waiting(self) -> int:
        """Subscribers waiting now."""
        return len(self._waiters)

    @property
    def reads(self) -> int:
        """Store reads made for waiters (shared reads count once)."""
        return self._waiters.reads

    @classmethod
    async def open(cls, store: Store) -> ListeningFeed:
        """Listen at once (so `open` fails when PostgreSQL does), then keep listening."""
        feed = cls(store)
        connection = await feed._listen()
        feed._task = asyncio.create_task(feed._run(connection))
        return feed

    async def wait_for_events(self, thread_id: str, after: int, timeout: float) -> list[Event]:
        """See `EventFeed.wait_for_events`."""
        return await self._waiters.wait(thread_id, after, timeout)

    async def close(self) -> None:
        """Stop listening and release the waiters."""
        await _close(self._waiters, self._task)

    async def _listen(self) -> psycopg.AsyncConnection[Any]:
        connection = await psycopg.AsyncConnection.connect(self._conninfo, autocommit=True)
        try:
            await connection.execute(f"LISTEN {EVENTS_CHANNEL}")
        except BaseException:
            await connection.close()
            raise
        self.backend_pid = connection.info.backend_pid
        return connection

    async def _run(self, connection: psycopg.AsyncConnection[Any]) -> None:
        try:
            while True:
                try:
                    await self._receive(connection)
                except Exception:
                    log.warning("event feed: the LISTEN connection failed", exc_info=True)
                await connection.close()
                self._waiters.wake_all()  # the store may hold what was committed meanwhile
                connection = await self._reconnect()
                self.reconnects += 1
                # Listening again: one more read catches what committed while nobody listened.
                self._waiters.wake_all()
        finally:
            await connection.close()

    async def _receive(self, connection: psycopg.AsyncConnection[Any]) -> None:
        while True:
            async for notify in connection.notifies(timeout=_LIVENESS_SECONDS):
                self.notifications += 1
                thread_id, _, last = notify.payload.rpartition(" ")
                if last.isdigit():
                    self._waiters.wake(thread_id, int(last))
            await connection.execute("SELECT 1")  # a quiet spell: is the session still there?

    async def _reconnect(self) -> psycopg.AsyncConnection[Any]:
        delay, most = _BACKOFF_SECONDS
        while True:
            await asyncio.sleep(delay)
            try:
                return await self._listen()
            except Exception:
                log.warning("event feed: PostgreSQL refused LISTEN; retrying", exc_info=True)
                delay = min(delay * 2, most)


async def _close(waiters: Waiters, task: asyncio.Task[None] | None) -> None:
    """Release every waiter, then stop the task that wakes them."""
    waiters.close()
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def open_event_feed(store: Store, *, poll_interval: float = 0.05) -> EventFeed:
    """The feed for `store`: push on PostgreSQL, one shared poller (every `poll_interval`
    seconds while someone waits) on anything else."""
    if store.engine.dialect.name == "postgresql":
        return await ListeningFeed.open(store)
    return PollingFeed(store, poll_interval)


__all__ = ["READ_LIMIT", "ListeningFeed", "PollingFeed", "Waiters", "open_event_feed"]
