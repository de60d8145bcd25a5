"""A thread's key-value data in the store (Runtime spec §14; caps in `store.kv`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, and_, delete, func, select

from weft.store import kv as kv_rules
from weft.store.database import Database
from weft.store.history import record_value
from weft.store.tables import kv


class Values:
    """JSON values by (thread_id, key); setting None deletes the key."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, thread_id: str, key: str) -> Any | None:
        """The JSON value stored under `key` for this thread, or None when unset."""
        if not isinstance(key, str):
            raise TypeError(f"kv key must be a string, got {type(key).__name__}")
        if len(key) > kv_rules.MAX_KEY_CHARS:
            return None  # no such key can have been set (§14.5)
        query = select(kv.c.value).where(kv.c.thread_id == thread_id, kv.c.key == key)
        with self._db.read() as connection:
            encoded = connection.scalar(query)
        return None if encoded is None else json.loads(encoded)

    def set(self, thread_id: str, key: str, value: Any) -> None:
        """Store `value` under `key` for this thread; None deletes the key."""
        kv_rules.check_key(key)
        encoded = None if value is None else kv_rules.encode_value(key, value)
        with self._db.write() as connection:
            write_value(self._db, connection, thread_id, key, encoded)


def write_value(
    database: Database, connection: Connection, thread_id: str, key: str, encoded: str | None
) -> None:
    """Set (or, for None, delete) one checked, encoded value in the caller's transaction."""
    where = and_(kv.c.thread_id == thread_id, kv.c.key == key)
    # The key cap counts this thread's keys, and the history is ordered by the thread's
    # events, so its writers go one at a time.
    database.lock_thread(connection, thread_id)
    record_value(connection, thread_id, key, encoded)
    if encoded is None:
        connection.execute(delete(kv).where(where))
        return
    now = datetime.now(UTC)
    if connection.scalar(select(kv.c.key).where(where)) is None:
        count = connection.scalar(
            select(func.count()).select_from(kv).where(kv.c.thread_id == thread_id)
        )
        if (count or 0) >= kv_rules.MAX_KEYS_PER_THREAD:
            raise kv_rules.too_many_keys(thread_id)
    statement = database.insert(kv).values(
        thread_id=thread_id, key=key, value=encoded, updated_at=now
    )
    connection.execute(
        statement.on_conflict_do_update(
            index_elements=["thread_id", "key"],
            set_={"value": encoded, "updated_at": now},
        )
    )
