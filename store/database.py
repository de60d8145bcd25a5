"""Database access shared by every store aggregate: transactions, upserts, thread locks, retries.

One `Database` wraps the engine; the aggregates (`messages`, `events`, files, …) use it
instead of each re-implementing how a write is serialized and retried.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import Connection, Engine, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, OperationalError

from weft.contract.events import Event
from weft.store.correlation import EventStamper, ThreadLinks, unchanged
from weft.store.thread_cache_budget import DEFAULT_THREADS
from weft.store.urls import WRITE_OPTION

T = TypeVar("T")

# An INSERT that supports ON CONFLICT; both dialects spell it the same way.
Upsert = postgresql.Insert | sqlite.Insert

# Advisory lock class id for per-thread writers on PostgreSQL ("wefu"; migrations use "weft").
_THREAD_LOCK_CLASS = 0x77656675
# A write that loses a race (unique violation, SQLite lock) is retried this many times.
_WRITE_ATTEMPTS = 10
# Where a write transaction keeps the events it stored, in `Connection.info`.
_STORED_EVENTS = "weft.stored_events"


class Database:
    """The engine plus the write rules every aggregate follows (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine, *, cached_threads: int = DEFAULT_THREADS) -> None:
        self.engine = engine
        self.postgres = engine.dialect.name == "postgresql"
        # SQLite takes one writer at a time, and a writer that finds the lock taken sleeps
        # in SQLite's busy handler for 1 to 100 ms before trying again: under many threads
        # a lock held for about 3 ms was waited on for 34 ms on average (seconds at worst).
        # This process's writers queue on a Python lock instead and go in as soon as it is
        # free; other processes still meet the busy handler.
        self._sqlite_writer = None if self.postgres else threading.Lock()
        # Correlation ids for every stored event (store/correlation.py); the
        # worker replaces the stamper with one that reads the activity and its span.
        self.stamp_event: EventStamper = unchanged
        self.thread_links = ThreadLinks(cached_threads)
        # Told of the events each write newly stored, after its commit (the worker's
        # metrics): a rolled-back or retried transaction reports nothing twice.
        self.events_committed: Callable[[Sequence[Event]], None] | None = None
        self._ignoring_duplicates: dict[tuple[str, tuple[str, ...]], Upsert] = {}

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection for reads; each statement sees committed data."""
        with self.engine.connect() as connection:
            yield connection

    @contextmanager
    def snapshot(self) -> Iterator[Connection]:
        """A read-only transaction whose statements all see one committed state: SQLite's
        deferred transaction in WAL mode, PostgreSQL's REPEATABLE READ."""
        with self.engine.connect() as connection:
            if self.postgres:
                connection.execution_options(isolation_level="REPEATABLE READ")
            with connection.begin():
                yield connection

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A connection in a write transaction (BEGIN IMMEDIATE on SQLite), committed on
        success; then `events_committed` hears of the events it stored."""
        stored: list[Event] = []
        with self._write_transaction() as connection:
            connection.info[_STORED_EVENTS] = stored
            try:
                yield connection
            finally:
                del connection.info[_STORED_EVENTS]  # the DBAPI connection is pooled
        if stored and self.events_committed is not None:
            self.events_committed(stored)

    def note_stored(self, connection: Connection, stored: Sequence[Event]) -> None:
        """Remember events stored in `connection`'s write transaction until it commits."""
        pending = connection.info.get(_STORED_EVENTS)
        if pending is not None:
            pending.extend(stored)

    @contextmanager
    def _write_transaction(self) -> Iterator[Connection]:
        if self._sqlite_writer is None:
            with self.engine.connect() as connection, connection.begin():
                yield connection
            return
        with self._sqlite_writer, self.engine.connect() as connection:
            connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                yield connection

    def insert(self, table: Table) -> Upsert:
        """An INSERT with the backend's ON CONFLICT support (upserts)."""
        if self.postgres:
            return postgresql.insert(table)
        return sqlite.insert(table)

    def insert_ignoring_duplicates(self, table: Table, unique: list[str]) -> Upsert:
        """An INSERT that skips rows whose `unique` columns are already stored (idempotency).

        Built once per table: every step inserts messages this way, and a statement built
        anew costs SQLAlchemy its cache key each time.
        """
        key = (table.name, tuple(unique))
        statement = self._ignoring_duplicates.get(key)
        if statement is None:
            statement = self.insert(table).on_conflict_do_nothing(index_elements=unique)
            self._ignoring_duplicates[key] = statement
        return statement

    def lock_thread(self, connection: Connection, thread_id: str) -> None:
        """Serialize this thread's writers until the transaction ends.

        PostgreSQL takes an advisory lock; SQLite's BEGIN IMMEDIATE already serializes
        every writer.
        """
        if self.postgres:
            connection.exec_driver_sql(
                "SELECT pg_advisory_xact_lock(%(classid)s, %(objid)s)",
                {"classid": _THREAD_LOCK_CLASS, "objid": _hash32(thread_id)},
            )

    def write_retrying(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in a write transaction (`write`), again in a new one when it lost a
        race (`retrying`): how an aggregate makes one idempotent write."""

        def once() -> T:
            with self.write() as connection:
                return work(connection)

        return self.retrying(once)

    def retrying(self, write: Callable[[], T]) -> T:
        """Run `write`, again when it lost a race (unique violation, lock, deadlock)."""
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                return write()
            except (IntegrityError, OperationalError) as error:
                if attempt == _WRITE_ATTEMPTS or not _is_race(error):
                    raise
                # Jitter so racing writers do not collide again in lockstep.
                time.sleep(random.uniform(0, 0.01 * attempt))
        raise AssertionError("unreachable")


def _hash32(value: str) -> int:
    """A stable signed 32-bit hash (Python's hash() differs between processes)."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def _is_race(error: IntegrityError | OperationalError) -> bool:
    if isinstance(error, IntegrityError):
        return True
    return "locked" in str(error.orig).lower() or "deadlock" in str(error.orig).lower()
