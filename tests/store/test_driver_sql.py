"""The statements run on the driver's cursor (store/driver_sql.py) fail as Core's do, so a
lost race is still retried by `Database.retrying`."""

from __future__ import annotations

import pytest
from sqlalchemy.exc import IntegrityError

from weft.store import Store
from weft.store.driver_sql import cursor_executemany, cursor_rows

_INSERT = (
    "INSERT INTO events (thread_id, sequence, event_id, type, timestamp, data) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


def test_a_unique_violation_on_the_cursor_is_cores_integrity_error(store: Store) -> None:
    row = ("t-driver", 1, "e-1", "thread.started", "2026-11-27T00:00:00.000Z", "{}")
    with store.database.write() as connection:
        cursor_executemany(connection, _INSERT, [row])
    with pytest.raises(IntegrityError), store.database.write() as connection:
        cursor_executemany(connection, _INSERT, [row])  # the same (thread, sequence)
    with store.database.read() as connection:
        found = cursor_rows(
            connection, "SELECT event_id FROM events WHERE thread_id = ?", ["t-driver"]
        )
    assert found == [("e-1",)]
