"""The history of a thread's key-value data and files, and the links between forks.

Each write of `kv` or `files` also inserts one history row, tagged with the thread's last
event sequence when it committed (`at_sequence`): the state "as of event P" is, per key or
path, the newest history row with `at_sequence < P` (a write tagged P came after event P).
The cost of a write is one indexed `max(sequence)` read and one insert; no history blob is
read or rewritten. A fork reads the state as of its point (docs/time-travel.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, select

from weft.store.database import Database
from weft.store.events import last_sequence
from weft.store.tables import (
    file_history,
    files,
    kv,
    kv_history,
    thread_links,
)


def record_value(connection: Connection, thread_id: str, key: str, encoded: str | None) -> None:
    """Keep one set (or, for None, delete) of a key."""
    connection.execute(
        kv_history.insert().values(
            thread_id=thread_id,
            key=key,
            value=encoded,
            at_sequence=last_sequence(connection, thread_id),
        )
    )


def record_paths(
    connection: Connection, thread_id: str, rows: Sequence[Mapping[str, Any] | str]
) -> None:
    """Keep the rows now at some paths (a `files` row's values), or their removal (paths)."""
    if not rows:
        return
    at = last_sequence(connection, thread_id)
    values = [
        {"path": row, "kind": "gone", "blob_digest": None, "size": 0, "mime_type": None}
        if isinstance(row, str)
        else {k: row[k] for k in ("path", "kind", "blob_digest", "size", "mime_type")}
        for row in rows
    ]
    connection.execute(
        file_history.insert(), [{**v, "thread_id": thread_id, "at_sequence": at} for v in values]
    )


def values_as_of(database: Database, thread_id: str, sequence: int) -> dict[str, str]:
    """The thread's keys and their encoded values right after event `sequence`."""
    query = (
        select(kv_history.c.key, kv_history.c.value)
        .where(kv_history.c.thread_id == thread_id, kv_history.c.at_sequence < sequence)
        .order_by(kv_history.c.id)
    )
    state: dict[str, str | None] = {}
    with database.read() as connection:
        for key, value in connection.execute(query):
            state[key] = value
    return {key: value for key, value in state.items() if value is not None}


def files_as_of(database: Database, thread_id: str, sequence: int) -> list[dict[str, Any]]:
    """The thread's files and directories right after event `sequence`, by path."""
    query = (
        select(file_history)
        .where(file_history.c.thread_id == thread_id, file_history.c.at_sequence < sequence)
        .order_by(file_history.c.id)
    )
    state: dict[str, dict[str, Any]] = {}
    with database.read() as connection:
        for row in connection.execute(query).mappings():
            state[row["path"]] = dict(row)
    return [
        {k: row[k] for k in ("path", "kind", "blob_digest", "size", "mime_type")}
        for path, row in sorted(state.items())
        if row["kind"] != "gone"
    ]


def seed_state(
    database: Database, thread_id: str, values: dict[str, str], rows: list[dict[str, Any]]
) -> None:
    """Give a new thread these values and files, with their history, in one commit."""
    with database.write() as connection:
        database.lock_thread(connection, thread_id)
        seed_state_in(connection, thread_id, values, rows)


def seed_state_in(
    connection: Connection, thread_id: str, values: dict[str, str], rows: list[dict[str, Any]]
) -> None:
    """Give a new thread (a fork) these values and files, with their history, in the
    caller's transaction."""
    now = datetime.now(UTC)
    if values:
        at = last_sequence(connection, thread_id)
        connection.execute(
            kv.insert(),
            [
                {"thread_id": thread_id, "key": k, "value": v, "updated_at": now}
                for k, v in values.items()
            ],
        )
        connection.execute(
            kv_history.insert(),
            [
                {"thread_id": thread_id, "key": k, "value": v, "at_sequence": at}
                for k, v in values.items()
            ],
        )
    if rows:
        connection.execute(
            files.insert(),
            [{**r, "thread_id": thread_id, "created_at": now, "updated_at": now} for r in rows],
        )
        record_paths(connection, thread_id, rows)


class ThreadLinks:
    """Which thread a fork came from, and which thread replaced a rewound one."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, thread_id: str) -> tuple[dict[str, Any] | None, str | None]:
        """(forked_from, successor_thread_id) of a thread; (None, None) when unlinked."""
        query = select(thread_links.c.forked_from, thread_links.c.successor_thread_id).where(
            thread_links.c.thread_id == thread_id
        )
        with self._db.read() as connection:
            row = connection.execute(query).first()
        return (None, None) if row is None else (row[0], row[1])

    def set_forked_from(self, connection: Connection, thread_id: str, link: dict[str, Any]) -> None:
        """Record a fork's origin in the caller's transaction."""
        self._upsert(connection, thread_id, {"forked_from": link})

    def set_successor(self, thread_id: str, successor: str) -> None:
        """Record that `successor` took over from `thread_id`."""
        with self._db.write() as connection:
            self._upsert(connection, thread_id, {"successor_thread_id": successor})

    def _upsert(self, connection: Connection, thread_id: str, values: dict[str, Any]) -> None:
        now = datetime.now(UTC)
        statement = (
            self._db.insert(thread_links)
            .values(thread_id=thread_id, updated_at=now, **values)
            .on_conflict_do_update(index_elements=["thread_id"], set_={**values, "updated_at": now})
        )
        connection.execute(statement)
