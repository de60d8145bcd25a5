"""A thread's stored rows as JSON records, and the one transaction that imports them.

`weft thread export` (client/bundles.py) reads each table family of one thread as plain
JSON records, and `import` writes them back into another store as they were (event
sequences kept), under the same id or a new one, refusing an id the store already holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from itertools import islice
from typing import Any

from sqlalchemy import Connection, Table, select

from weft.store.database import Database
from weft.store.sealed import seal
from weft.store.store import Store
from weft.store.tables import (
    UTCDateTime,
    blobs,
    budgets,
    context_boundaries,
    effects,
    events,
    file_history,
    files,
    kv,
    kv_history,
    message_history,
    messages,
    snapshots,
    subagents,
    thread_links,
    threads,
)

# The per-thread tables a bundle carries, by part name, with the column naming the thread.
# Sequence order matters: events are read and written in their stored order.
THREAD_TABLES: dict[str, tuple[Table, str, str]] = {
    "messages": (messages, "thread_id", "position"),
    "events": (events, "thread_id", "sequence"),
    "kv": (kv, "thread_id", "key"),
    "files": (files, "thread_id", "path"),
    "boundaries": (context_boundaries, "thread_id", "ordinal"),
    "effects": (effects, "thread_id", "effect_id"),
    "children": (subagents, "parent_thread_id", "reference"),
    # Every change of a key or path, so a fork of the imported thread reads old values too.
    "kv_history": (kv_history, "thread_id", "id"),
    "file_history": (file_history, "thread_id", "id"),
    "message_history": (message_history, "thread_id", "id"),
    # The ledger of the tree the thread is the root of (a child's is its root's: none).
    "budgets": (budgets, "root_thread_id", "root_thread_id"),
    # Where the thread was forked from, and its successor after a rewind.
    "thread_links": (thread_links, "thread_id", "thread_id"),
}
# Parts a bundle may lack (written before weft exported them); and the columns the
# importing store assigns itself (row ids), left out of the records.
OPTIONAL_PARTS = frozenset(
    {"kv_history", "file_history", "message_history", "budgets", "thread_links"}
)
_ASSIGNED = frozenset({"kv_history.id", "file_history.id", "message_history.id"})
_BATCH = 500


class ThreadExists(ValueError):
    """The importing store already holds a thread with that id."""


def thread_records(store: Store, part: str, thread_id: str) -> Iterator[dict[str, Any]]:
    """The thread's rows of `part` as JSON-ready records, in a stable order, in batches."""
    table, column, order = THREAD_TABLES[part]
    query = select(table).where(table.c[column] == thread_id).order_by(table.c[order])
    with store.database.read() as connection:
        result = connection.execution_options(yield_per=_BATCH).execute(query)
        for row in result.mappings():
            yield _to_json(table, row)


def blob_data(store: Store, digest: str) -> bytes | None:
    """The bytes of one blob, or None."""
    return store.files.get_blob(digest)


def thread_known(store: Store, thread_id: str) -> bool:
    """True when the store has a row or any event for `thread_id`."""
    with store.database.read() as connection:
        return _known(connection, thread_id)


def import_rows(
    store: Store,
    thread: dict[str, Any],
    parts: Mapping[str, Iterable[dict[str, Any]]],
    blob_bytes: Iterable[tuple[str, bytes]],
    snapshot_data: Mapping[str, dict[str, Any]],
) -> None:
    """Write one thread's rows in one transaction; `ThreadExists` when its id is taken.

    `thread` is the thread row with env already reduced to names; it is sealed with this
    store's keys like any thread row. Parts and blobs are read as they are written, in
    batches. Snapshots and blobs are content-addressed, so one the store already has is kept
    as it is.
    """
    database: Database = store.database
    thread_id = str(thread["thread_id"])
    row = _from_json(threads, thread)
    row["env"] = seal(row["env"], store.keyring, bound_to=f"thread {thread_id}")
    with database.write() as connection:
        database.lock_thread(connection, thread_id)
        if _known(connection, thread_id):
            raise ThreadExists(f"thread {thread_id!r} already exists in this store")
        for digest, data in blob_bytes:
            connection.execute(
                database.insert_ignoring_duplicates(blobs, ["digest"]).values(
                    digest=digest, size=len(data), data=data, created_at=row["created_at"]
                )
            )
        for snapshot_id, definitions in snapshot_data.items():
            connection.execute(
                database.insert_ignoring_duplicates(snapshots, ["snapshot_id"]).values(
                    snapshot_id=snapshot_id, data=definitions, created_at=row["created_at"]
                )
            )
        connection.execute(threads.insert().values(row))
        for part, records in parts.items():
            table = THREAD_TABLES[part][0]
            rows = (_from_json(table, record) for record in records)
            while batch := list(islice(rows, _BATCH)):
                connection.execute(table.insert(), batch)


def _known(connection: Connection, thread_id: str) -> bool:
    found = connection.scalar(select(threads.c.thread_id).where(threads.c.thread_id == thread_id))
    if found is not None:
        return True
    any_event = select(events.c.sequence).where(events.c.thread_id == thread_id).limit(1)
    return connection.scalar(any_event) is not None


def _to_json(table: Table, row: Mapping[Any, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for column in table.columns:
        if f"{table.name}.{column.name}" in _ASSIGNED:
            continue
        value = row[column.name]
        record[column.name] = value.isoformat() if isinstance(value, datetime) else value
    return record


def _from_json(table: Table, record: Mapping[str, Any]) -> dict[str, Any]:
    """A row for `table` from a record; unknown keys are refused naming the column."""
    unknown = set(record) - {c.name for c in table.columns}
    if unknown:
        raise ValueError(f"{table.name}: unknown column(s) {sorted(unknown)}")
    row = dict(record)
    for column in table.columns:
        value = row.get(column.name)
        if isinstance(column.type, UTCDateTime) and isinstance(value, str):
            row[column.name] = datetime.fromisoformat(value)
    return row
