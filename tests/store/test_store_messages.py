"""Messages: idempotent appends, ordering, updates and deletes with their tool results."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from store_factories import message, new_thread_id, tool_call

from weft.store import Store


def test_append_lists_messages_in_position_order(store: Store) -> None:
    """Messages come back ordered by position whatever order they were written in."""
    thread = new_thread_id()
    store.messages.append([message(thread, 2), message(thread, 0)])
    store.messages.append([message(thread, 1)])
    assert [m.position for m in store.messages.list(thread)] == [0, 1, 2]


def test_append_is_idempotent_by_id(store: Store) -> None:
    """Writing the same message ids again stores nothing twice and keeps the first write."""
    thread = new_thread_id()
    store.messages.append([message(thread, 0), message(thread, 1)])
    store.messages.append([message(thread, 0, content="retried"), message(thread, 1)])
    store.messages.append([message(thread, 2), message(thread, 2)])
    listed = store.messages.list(thread)
    assert [m.id for m in listed] == ["m0", "m1", "m2"]
    assert listed[0].content == "message 0"


def test_append_of_nothing_is_a_no_op(store: Store) -> None:
    """An empty batch writes nothing and does not fail."""
    store.messages.append([])
    assert store.messages.list(new_thread_id()) == []


def test_list_after_position_and_limit(store: Store) -> None:
    """`after_position` and `limit` page through the transcript."""
    thread = new_thread_id()
    store.messages.append([message(thread, p) for p in range(5)])
    page = store.messages.list(thread, after_position=1, limit=2)
    assert [m.position for m in page] == [2, 3]


def test_messages_are_per_thread(store: Store) -> None:
    """The same message id in two threads is two messages."""
    first, second = new_thread_id(), new_thread_id()
    store.messages.append([message(first, 0), message(second, 0, content="other")])
    assert store.messages.get(first, "m0").content == "message 0"  # type: ignore[union-attr]
    assert store.messages.get(second, "m0").content == "other"  # type: ignore[union-attr]


def test_every_field_round_trips(store: Store) -> None:
    """A message with every optional field set reads back equal."""
    thread = new_thread_id()
    original = message(
        thread,
        0,
        role="assistant",
        content="héllo \u2603",
        name="helper",
        tool_calls=[tool_call("c1")],
        status="pending",
        silent=True,
        reasoning_content="because",
        parent_id="p",
        depth=2,
        attachments=["file-1"],
        metadata={"nested": {"a": [1, 2.5, None, True]}},
        side="b",
        turn_id="turn-1",
    )
    store.messages.append([original])
    assert store.messages.get(thread, "m0") == original


def test_get_missing_message_is_none(store: Store) -> None:
    """Reading an unknown message id returns None."""
    assert store.messages.get(new_thread_id(), "nope") is None


def test_update_message_changes_fields(store: Store) -> None:
    """`update_message` applies the changes, persists them and returns the new message."""
    thread = new_thread_id()
    store.messages.append([message(thread, 0, status="pending")])
    updated = store.messages.update(thread, "m0", status="completed", content="done")
    assert updated is not None and updated.status == "completed"
    assert store.messages.get(thread, "m0") == updated


def test_update_message_validates_changes(store: Store) -> None:
    """Unknown fields, bad values and id changes are rejected and nothing is written."""
    thread = new_thread_id()
    store.messages.append([message(thread, 0)])
    with pytest.raises(ValidationError):
        store.messages.update(thread, "m0", colour="red")
    with pytest.raises(ValidationError):
        store.messages.update(thread, "m0", status="bogus")
    with pytest.raises(ValueError, match="id"):
        store.messages.update(thread, "m0", id="m9")
    assert store.messages.get(thread, "m0") == message(thread, 0)


def test_update_missing_message_is_none(store: Store) -> None:
    """Updating an unknown message returns None and creates nothing."""
    thread = new_thread_id()
    assert store.messages.update(thread, "m0", content="x") is None
    assert store.messages.list(thread) == []


def test_delete_message_deletes_its_tool_results(store: Store) -> None:
    """Deleting an assistant message also deletes the tool messages answering its calls."""
    thread, other = new_thread_id(), new_thread_id()
    assistant = message(
        thread, 0, id="a", role="assistant", tool_calls=[tool_call("c1"), tool_call("c2")]
    )
    results = [
        message(thread, 1, id="r1", role="tool", tool_call_id="c1"),
        message(thread, 2, id="r2", role="tool", tool_call_id="c2"),
        message(thread, 3, id="r3", role="tool", tool_call_id="c3"),
    ]
    store.messages.append([assistant, *results])
    store.messages.append([message(other, 0, id="r1", role="tool", tool_call_id="c1")])
    assert store.messages.delete(thread, "a") is True
    assert [m.id for m in store.messages.list(thread)] == ["r3"]
    assert [m.id for m in store.messages.list(other)] == ["r1"]


def test_delete_missing_message_is_false(store: Store) -> None:
    """Deleting an unknown message reports False."""
    assert store.messages.delete(new_thread_id(), "nope") is False


def test_nul_characters_do_not_break_writes(store: Store) -> None:
    """Content with NUL is stored: as is on SQLite, with U+FFFD on PostgreSQL (no NUL there)."""
    thread = new_thread_id()
    store.messages.append([message(thread, 0, role="tool", content="a\x00b", tool_call_id="c")])
    expected = "a\ufffdb" if store.engine.dialect.name == "postgresql" else "a\x00b"
    assert store.messages.get(thread, "m0").content == expected  # type: ignore[union-attr]
    store.messages.append([message(thread, 1, metadata={"raw": "\x00"})])
    assert store.messages.get(thread, "m1").metadata == {"raw": "\x00"}  # type: ignore[union-attr]
