"""The `Store`: messages, events, key-value data, snapshots and thread rows in one database.

Every method is synchronous and opens its own short transaction; activities call them
through `asyncio.to_thread`. Writes are idempotent so a retried activity stores nothing
twice.
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Engine,
    Insert,
    RowMapping,
    Table,
    and_,
    delete,
    func,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import IntegrityError, OperationalError

from activities.crypto import Keyring
from activities.store import kv as kv_rules
from activities.store import registry
from activities.store.files import FileStore
from activities.store.migrate import upgrade
from activities.store.rows import (
    ThreadRow,
    event_to_row,
    message_to_row,
    row_to_event,
    row_to_message,
    row_to_thread,
    thread_to_row,
)
from activities.store.sealed import seal, unseal
from activities.store.tables import events, kv, messages, snapshots, threads
from activities.store.urls import WRITE_OPTION, create_store_engine
from contract.events import Event
from contract.messages import Message
from contract.thread_env import carries_env

T = TypeVar("T")

# Advisory lock class id for per-thread writers on PostgreSQL ("wefu"; migrations use "weft").
_THREAD_LOCK_CLASS = 0x77656675
# A write that loses a race (unique violation, SQLite lock) is retried this many times.
_WRITE_ATTEMPTS = 10


class Store:
    """Durable storage for weft, over SQLite (embedded) or PostgreSQL (shared)."""

    def __init__(self, engine: Engine, *, keyring: Keyring | None = None) -> None:
        self._engine = engine
        self._postgres = engine.dialect.name == "postgresql"
        self._keyring = keyring

    @classmethod
    def open(cls, url: str, *, migrate: bool = True, keyring: Keyring | None = None) -> Store:
        """Connect to `url` and, unless `migrate` is false, upgrade the schema to head.

        With a `keyring`, thread env is encrypted at rest (`activities/store/sealed.py`).
        """
        engine = create_store_engine(url)
        if migrate:
            try:
                upgrade(engine)
            except BaseException:
                engine.dispose()
                raise
        return cls(engine, keyring=keyring)

    @property
    def engine(self) -> Engine:
        """The underlying engine, for health checks and tests."""
        return self._engine

    @property
    def keyring(self) -> Keyring | None:
        """The keys that seal env at rest, or None (stored as given)."""
        return self._keyring

    @cached_property
    def files(self) -> FileStore:
        """The thread filesystems and blobs kept in this store (`activities/store/files.py`)."""
        return FileStore(self)

    def close(self) -> None:
        """Close every pooled connection."""
        self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- messages -------------------------------------------------------------------------

    def append_messages(self, messages_: Sequence[Message]) -> None:
        """Store `messages_` in one transaction, skipping any (thread_id, id) already stored."""
        rows = list({(m.thread_id, m.id): message_to_row(m) for m in messages_}.values())
        if not rows:
            return
        statement = self._insert(messages).on_conflict_do_nothing(
            index_elements=["thread_id", "id"]
        )
        with self._write() as connection:
            connection.execute(statement, rows)

    def list_messages(
        self, thread_id: str, *, after_position: int = -1, limit: int | None = None
    ) -> list[Message]:
        """The thread's messages with position > `after_position`, in position order."""
        query = (
            select(messages)
            .where(messages.c.thread_id == thread_id, messages.c.position > after_position)
            .order_by(messages.c.position, messages.c.created_at, messages.c.id)
            .limit(limit)
        )
        with self._engine.connect() as connection:
            return [row_to_message(row) for row in connection.execute(query).mappings()]

    def get_message(self, thread_id: str, message_id: str) -> Message | None:
        """One message, or None when the thread has no message with that id."""
        with self._engine.connect() as connection:
            return _get_message(connection, thread_id, message_id)

    def update_message(self, thread_id: str, message_id: str, **changes: Any) -> Message | None:
        """Apply `changes` (validated as `Message` fields) and return the message, or None."""
        if {"id", "thread_id"} & changes.keys():
            raise ValueError("update_message cannot change a message's id or thread_id")
        with self._write() as connection:
            current = _get_message(connection, thread_id, message_id)
            if current is None:
                return None
            updated = Message.model_validate({**current.model_dump(), **changes})
            connection.execute(
                update(messages)
                .where(messages.c.thread_id == thread_id, messages.c.id == message_id)
                .values(message_to_row(updated))
            )
            return updated

    def delete_message(self, thread_id: str, message_id: str) -> bool:
        """Delete a message and the tool results answering its tool calls; False if absent."""
        with self._write() as connection:
            current = _get_message(connection, thread_id, message_id)
            if current is None:
                return False
            call_ids = [call.id for call in current.tool_calls or []]
            if call_ids:
                connection.execute(
                    delete(messages).where(
                        messages.c.thread_id == thread_id,
                        messages.c.role == "tool",
                        messages.c.tool_call_id.in_(call_ids),
                    )
                )
            connection.execute(
                delete(messages).where(
                    messages.c.thread_id == thread_id, messages.c.id == message_id
                )
            )
            return True

    # -- events ---------------------------------------------------------------------------

    def append_events(self, events_: Sequence[Event]) -> list[Event]:
        """Store new events with the next sequence numbers of their thread; skip known ids.

        Returns only the events stored by this call, with `sequence` set. Writers of one
        thread are serialized (advisory lock on PostgreSQL, BEGIN IMMEDIATE on SQLite), and
        a transaction that still loses a race on a unique constraint is retried.
        """
        return self.record((), events_)

    def record(self, messages_: Sequence[Message], events_: Sequence[Event]) -> list[Event]:
        """Store messages and events in one transaction; both idempotent as above.

        Activities record what one phase produced with a single commit, since each commit
        is a disk flush. Returns the newly stored events.
        """
        rows = list({(m.thread_id, m.id): message_to_row(m) for m in messages_}.values())
        by_thread: dict[str, list[Event]] = {}
        seen: set[tuple[str, str]] = set()
        for event in events_:
            if (event.thread_id, event.event_id) not in seen:
                seen.add((event.thread_id, event.event_id))
                by_thread.setdefault(event.thread_id, []).append(event)
        if not rows and not by_thread:
            return []
        return self._retrying(lambda: self._record_once(rows, by_thread))

    def _record_once(
        self, rows: list[dict[str, Any]], by_thread: dict[str, list[Event]]
    ) -> list[Event]:
        stored: list[Event] = []
        with self._write() as connection:
            if rows:
                connection.execute(
                    self._insert(messages).on_conflict_do_nothing(
                        index_elements=["thread_id", "id"]
                    ),
                    rows,
                )
            for thread_id in sorted(by_thread):  # a fixed lock order cannot deadlock
                self._lock_thread(connection, thread_id)
                batch = by_thread[thread_id]
                known = set(
                    connection.scalars(
                        select(events.c.event_id).where(
                            events.c.thread_id == thread_id,
                            events.c.event_id.in_([e.event_id for e in batch]),
                        )
                    )
                )
                fresh = [e for e in batch if e.event_id not in known]
                if not fresh:
                    continue
                last = _last_sequence(connection, thread_id)
                numbered = [
                    e.model_copy(update={"sequence": last + i}) for i, e in enumerate(fresh, 1)
                ]
                connection.execute(events.insert(), [event_to_row(e) for e in numbered])
                registry.project(connection, numbered)
                stored.extend(numbered)
        return stored

    def read_events(
        self,
        thread_id: str,
        *,
        after: int = 0,
        limit: int = 500,
        types: Sequence[str] | None = None,
    ) -> list[Event]:
        """The thread's events with sequence > `after`, ascending, optionally of `types`."""
        query = select(events.c.data).where(
            events.c.thread_id == thread_id, events.c.sequence > after
        )
        if types is not None:
            query = query.where(events.c.type.in_(list(types)))
        query = query.order_by(events.c.sequence).limit(limit)
        with self._engine.connect() as connection:
            return [row_to_event(data) for data in connection.scalars(query)]

    def last_sequence(self, thread_id: str) -> int:
        """The thread's highest event sequence, or 0 when it has no events."""
        with self._engine.connect() as connection:
            return _last_sequence(connection, thread_id)

    # -- key-value (Runtime spec §14; caps in activities.store.kv) -------------------------

    def get_value(self, thread_id: str, key: str) -> Any | None:
        """The JSON value stored under `key` for this thread, or None when unset."""
        if not isinstance(key, str):
            raise TypeError(f"kv key must be a string, got {type(key).__name__}")
        if len(key) > kv_rules.MAX_KEY_CHARS:
            return None  # no such key can have been set (§14.5)
        query = select(kv.c.value).where(kv.c.thread_id == thread_id, kv.c.key == key)
        with self._engine.connect() as connection:
            encoded = connection.scalar(query)
        return None if encoded is None else json.loads(encoded)

    def set_value(self, thread_id: str, key: str, value: Any) -> None:
        """Store `value` under `key` for this thread; None deletes the key."""
        kv_rules.check_key(key)
        where = and_(kv.c.thread_id == thread_id, kv.c.key == key)
        if value is None:
            with self._write() as connection:
                connection.execute(delete(kv).where(where))
            return
        encoded = kv_rules.encode_value(key, value)
        now = datetime.now(UTC)
        with self._write() as connection:
            self._lock_thread(connection, thread_id)
            if connection.scalar(select(kv.c.key).where(where)) is None:
                count = connection.scalar(
                    select(func.count()).select_from(kv).where(kv.c.thread_id == thread_id)
                )
                if (count or 0) >= kv_rules.MAX_KEYS_PER_THREAD:
                    raise kv_rules.too_many_keys(thread_id)
            statement = self._insert(kv).values(
                thread_id=thread_id, key=key, value=encoded, updated_at=now
            )
            connection.execute(
                statement.on_conflict_do_update(
                    index_elements=["thread_id", "key"],
                    set_={"value": encoded, "updated_at": now},
                )
            )

    # -- definition snapshots -------------------------------------------------------------

    def put_snapshot(self, snapshot_id: str, data: dict[str, Any]) -> None:
        """Store a content-addressed snapshot; storing the same id again changes nothing.

        A snapshot whose definitions carry env is sealed when keys are configured.
        """
        if carries_env(data):
            data = seal(data, self._keyring, bound_to=f"snapshot {snapshot_id}")
        statement = (
            self._insert(snapshots)
            .values(snapshot_id=snapshot_id, data=data, created_at=datetime.now(UTC))
            .on_conflict_do_nothing(index_elements=["snapshot_id"])
        )
        with self._write() as connection:
            connection.execute(statement)

    def get_snapshot(self, snapshot_id: str) -> dict[str, Any] | None:
        """The snapshot stored under `snapshot_id`, or None."""
        query = select(snapshots.c.data).where(snapshots.c.snapshot_id == snapshot_id)
        with self._engine.connect() as connection:
            data: dict[str, Any] | None = connection.scalar(query)
        if data is None:
            return None
        return unseal(data, self._keyring, bound_to=f"snapshot {snapshot_id}")

    # -- thread rows ----------------------------------------------------------------------

    def upsert_thread(self, row: ThreadRow) -> None:
        """Insert the row, or update every column of it but `created_at`."""
        values = thread_to_row(row)
        values["env"] = seal(row.env, self._keyring, bound_to=f"thread {row.thread_id}")
        changed = {k: v for k, v in values.items() if k not in ("thread_id", "created_at")}
        statement = (
            self._insert(threads)
            .values(values)
            .on_conflict_do_update(index_elements=["thread_id"], set_=changed)
        )
        with self._write() as connection:
            connection.execute(statement)

    def get_thread(self, thread_id: str) -> ThreadRow | None:
        """The thread's row, or None."""
        query = select(threads).where(threads.c.thread_id == thread_id)
        with self._engine.connect() as connection:
            row = connection.execute(query).mappings().first()
        return None if row is None else self._thread(row)

    def list_threads(
        self, *, agent: str | None = None, status: str | None = None, limit: int = 100
    ) -> list[ThreadRow]:
        """Thread rows, newest first, optionally of one agent and/or status."""
        query = select(threads)
        if agent is not None:
            query = query.where(threads.c.agent == agent)
        if status is not None:
            query = query.where(threads.c.status == status)
        query = query.order_by(threads.c.created_at.desc(), threads.c.thread_id.desc())
        with self._engine.connect() as connection:
            rows = connection.execute(query.limit(limit)).mappings().all()
        return [self._thread(row) for row in rows]

    def _thread(self, row: RowMapping) -> ThreadRow:
        thread = row_to_thread(row)
        thread.env = unseal(thread.env, self._keyring, bound_to=f"thread {thread.thread_id}")
        return thread

    # -- plumbing -------------------------------------------------------------------------

    @contextmanager
    def _write(self) -> Iterator[Connection]:
        """A connection in a write transaction, committed on success."""
        with self._engine.connect() as connection:
            connection.execution_options(**{WRITE_OPTION: True})
            with connection.begin():
                yield connection

    def _insert(self, table: Table) -> Any:
        """An INSERT with the backend's ON CONFLICT support (SQLite and PostgreSQL)."""
        dialect = postgresql if self._postgres else sqlite
        statement: Insert = dialect.insert(table)
        return statement

    def _lock_thread(self, connection: Connection, thread_id: str) -> None:
        """Serialize this thread's writers until the transaction ends (PostgreSQL only)."""
        if self._postgres:
            connection.exec_driver_sql(
                "SELECT pg_advisory_xact_lock(%(classid)s, %(objid)s)",
                {"classid": _THREAD_LOCK_CLASS, "objid": _hash32(thread_id)},
            )

    def _retrying(self, write: Callable[[], T]) -> T:
        for attempt in range(1, _WRITE_ATTEMPTS + 1):
            try:
                return write()
            except (IntegrityError, OperationalError) as error:
                if attempt == _WRITE_ATTEMPTS or not _is_race(error):
                    raise
                # Jitter so racing writers do not collide again in lockstep.
                time.sleep(random.uniform(0, 0.01 * attempt))
        raise AssertionError("unreachable")


def _get_message(connection: Connection, thread_id: str, message_id: str) -> Message | None:
    query = select(messages).where(messages.c.thread_id == thread_id, messages.c.id == message_id)
    row = connection.execute(query).mappings().first()
    return None if row is None else row_to_message(row)


def _last_sequence(connection: Connection, thread_id: str) -> int:
    query = select(func.max(events.c.sequence)).where(events.c.thread_id == thread_id)
    return int(connection.scalar(query) or 0)


def _hash32(value: str) -> int:
    """A stable signed 32-bit hash (Python's hash() differs between processes)."""
    digest = hashlib.blake2b(value.encode("utf-8"), digest_size=4).digest()
    return int.from_bytes(digest, "big", signed=True)


def _is_race(error: IntegrityError | OperationalError) -> bool:
    if isinstance(error, IntegrityError):
        return True
    return "locked" in str(error.orig).lower() or "deadlock" in str(error.orig).lower()
