"""Definition snapshots and the thread read-model rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError
from store_factories import new_thread_id

from weft.store import Store, ThreadRow

T0 = datetime(2025, 11, 21, 10, 0, tzinfo=UTC)


def _row(thread_id: str, minutes: int = 0, **fields: object) -> ThreadRow:
    values: dict[str, object] = {
        "thread_id": thread_id,
        "agent": "helper",
        "status": "running",
        "created_at": T0 + timedelta(minutes=minutes),
    }
    return ThreadRow.model_validate({**values, **fields})


def test_snapshot_round_trip(store: Store) -> None:
    """A stored snapshot reads back equal; an unknown id reads None."""
    data = {"name": "helper", "tools": [{"name": "lookup", "schema": {"type": "object"}}]}
    store.snapshots.put("sha256:abc", data)
    assert store.snapshots.get("sha256:abc") == data
    assert store.snapshots.get("sha256:missing") is None


def test_snapshot_put_is_idempotent(store: Store) -> None:
    """Putting an existing snapshot id again keeps the first content and does not fail."""
    store.snapshots.put("sha256:same", {"v": 1})
    store.snapshots.put("sha256:same", {"v": 1})
    assert store.snapshots.get("sha256:same") == {"v": 1}


def test_thread_row_round_trip(store: Store) -> None:
    """Every field of a thread row, with UTC datetimes, reads back equal."""
    row = _row(
        new_thread_id(),
        session_id="s",
        user_id="u",
        parent_thread_id="p",
        stop_reason="done",
        env={"A": "1"},
        usage={"input_tokens": 10, "cost": 0.25},
        last_outcome="completed",
    )
    store.threads.upsert(row)
    got = store.threads.get(row.thread_id)
    assert got == row
    assert got is not None and got.created_at.tzinfo is not None
    assert got.created_at.utcoffset() == timedelta(0)


def test_thread_row_converts_offsets_to_utc(store: Store) -> None:
    """A datetime with another offset is stored and returned as the same instant in UTC."""
    local = T0.astimezone(timezone(timedelta(hours=5)))
    row = _row(new_thread_id(), created_at=local)
    store.threads.upsert(row)
    got = store.threads.get(row.thread_id)
    assert got is not None and got.created_at == T0 and got.created_at.utcoffset() == timedelta(0)


def test_thread_row_needs_aware_datetimes() -> None:
    """A naive created_at is rejected rather than guessed."""
    with pytest.raises(ValidationError, match="created_at"):
        _row("t", created_at=datetime(2025, 1, 1))


def test_upsert_updates_but_keeps_created_at(store: Store) -> None:
    """Upserting an existing thread updates its fields and keeps its creation time."""
    thread = new_thread_id()
    store.threads.upsert(_row(thread))
    later = T0 + timedelta(hours=1)
    store.threads.upsert(_row(thread, 30, status="completed", updated_at=later, usage={"n": 1}))
    got = store.threads.get(thread)
    assert got is not None
    assert (got.status, got.created_at, got.updated_at, got.usage) == (
        "completed",
        T0,
        later,
        {"n": 1},
    )


def test_get_missing_thread_is_none(store: Store) -> None:
    """An unknown thread id reads None."""
    assert store.threads.get(new_thread_id()) is None


def test_list_threads_newest_first_with_filters(store: Store) -> None:
    """Listing orders by creation time, newest first, and filters by agent and status."""
    ids = [new_thread_id() for _ in range(4)]
    store.threads.upsert(_row(ids[0], 0))
    store.threads.upsert(_row(ids[1], 1, agent="other"))
    store.threads.upsert(_row(ids[2], 2, status="completed"))
    store.threads.upsert(_row(ids[3], 3))
    assert [r.thread_id for r in store.threads.list()] == ids[::-1]
    assert [r.thread_id for r in store.threads.list(agent="helper")] == [ids[3], ids[2], ids[0]]
    assert [r.thread_id for r in store.threads.list(status="completed")] == [ids[2]]
    assert [r.thread_id for r in store.threads.list(agent="helper", status="running")] == [
        ids[3],
        ids[0],
    ]
    assert [r.thread_id for r in store.threads.list(limit=2)] == [ids[3], ids[2]]
