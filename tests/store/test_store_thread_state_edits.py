"""The store writes behind ThreadState's delete_message and set_env: each with its event,
in one transaction, and idempotent by the event's id."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from store_factories import event, message, new_thread_id, running_thread, tool_call

from weft.activities.crypto import new_key, parse_keys
from weft.contract.thread_env import EnvEntry
from weft.store import Store


def test_delete_message_takes_the_results_and_records_their_ids(store: Store) -> None:
    """The assistant message and the results of its calls go; the event lists them; a retry
    with the same event returns the same ids and deletes nothing more."""
    thread = new_thread_id()
    store.messages.append(
        [
            message(thread, 0),
            message(thread, 1, id="a1", role="assistant", tool_calls=[tool_call("c1")]),
            message(thread, 2, id="r1", role="tool", tool_call_id="c1"),
            message(thread, 3, id="kept"),
        ]
    )
    deleted = event(thread, "call_x:delete1", "artifact.changed", payload={"change": "x"})
    assert store.events.delete_message(thread, "a1", deleted) == ["a1", "r1"]
    assert [m.id for m in store.messages.list(thread)] == ["m0", "kept"]
    [recorded] = store.events.read(thread)
    assert recorded.payload == {"change": "x", "messageIds": ["a1", "r1"]}
    assert store.events.delete_message(thread, "a1", deleted) == ["a1", "r1"]
    assert len(store.events.read(thread)) == 1
    absent = event(thread, "call_x:delete2", "artifact.changed", payload={})
    assert store.events.delete_message(thread, "a1", absent) == []
    assert len(store.events.read(thread)) == 1  # nothing deleted, nothing recorded


def test_set_env_seals_the_value_with_its_event(sqlite_url: str) -> None:
    """With keys, the env column holds an envelope; the row reads back the new value with
    the old ones; a thread without a row is a KeyError."""
    keys = parse_keys([f"k1:{new_key()}"], source="test")
    store = Store.open(sqlite_url, keyring=keys)
    try:
        thread = new_thread_id()
        store.threads.upsert(running_thread(thread, env={"REGION": "eu"}))
        change = event(thread, "call_x:setenv1", "thread.updated", payload={"envSet": {}})
        store.threads.set_env(thread, "TOKEN", EnvEntry(value="s3cret-v", type="secret"), change)
        store.threads.set_env(thread, "TOKEN", EnvEntry(value="s3cret-v", type="secret"), change)
        row = store.threads.get(thread)
        assert row is not None
        assert row.env == {"REGION": "eu", "TOKEN": {"value": "s3cret-v", "type": "secret"}}
        assert [e.event_id for e in store.events.read(thread)] == ["call_x:setenv1"]
        with store.engine.connect() as connection:
            raw = connection.scalar(
                text("SELECT env FROM threads WHERE thread_id = :id"), {"id": thread}
            )
        assert "$weftEncrypted" in str(raw) and "s3cret-v" not in str(raw)
        with pytest.raises(KeyError, match="has no row"):
            store.threads.set_env("thread-none", "X", EnvEntry(value=1), change)
    finally:
        store.close()
