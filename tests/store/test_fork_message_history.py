"""The history of a thread's messages: each message as it was at an event, for forks."""

from __future__ import annotations

from store_factories import event, message, new_thread_id, tool_call

from weft.store import Store
from weft.store.message_history import messages_as_of
from weft.store.tables import message_history


def _mark(store: Store, thread_id: str, name: str) -> int:
    """Append a marker event and return its sequence."""
    (stored,) = store.events.append([event(thread_id, f"{thread_id}:{name}", "runtime.warning")])
    assert stored.sequence is not None
    return stored.sequence


def _contents(store: Store, thread_id: str, at: int) -> list[tuple[str, object]]:
    return [(m.id, m.content) for m in messages_as_of(store.database, thread_id, at)]


def test_a_message_as_of_an_event(store: Store) -> None:
    """A message updated after event P reads as it was at P; one updated before P reads as
    updated; its later versions do not leak into an earlier point."""
    thread = new_thread_id()
    store.messages.append([message(thread, 0), message(thread, 1)])
    first = _mark(store, thread, "one")
    store.events.update_message(thread, "m0", {"content": "edited once"}, event(thread, "e1"))
    second = _mark(store, thread, "two")
    store.events.update_message(thread, "m0", {"content": "edited twice"}, event(thread, "e2"))
    store.events.update_message(thread, "m1", {"content": "m1 edited"}, event(thread, "e3"))

    assert _contents(store, thread, first) == [("m0", "message 0"), ("m1", "message 1")]
    assert _contents(store, thread, second) == [("m0", "edited once"), ("m1", "message 1")]
    now = store.events.last_sequence(thread) + 1
    assert _contents(store, thread, now) == [("m0", "edited twice"), ("m1", "m1 edited")]


def test_a_deleted_message_comes_back_before_its_delete(store: Store) -> None:
    """A message deleted after the point (with the tool results answering its calls) is
    read back whole at the point, in transcript order; after the delete it is gone."""
    thread = new_thread_id()
    call = message(thread, 1, role="assistant", content=None, tool_calls=[tool_call("c1")])
    result = message(thread, 2, role="tool", content="42", tool_call_id="c1")
    store.messages.append([message(thread, 0), call, result, message(thread, 3)])
    point = _mark(store, thread, "point")

    deleted = store.events.delete_message(thread, "m1", event(thread, "gone", "runtime.warning"))

    assert deleted == ["m1", "m2"]
    back = messages_as_of(store.database, thread, point)
    assert [m.id for m in back] == ["m0", "m1", "m2", "m3"]
    assert back[1] == call and back[2] == result
    later = store.events.last_sequence(thread) + 1
    assert [m.id for m in messages_as_of(store.database, thread, later)] == ["m0", "m3"]


def test_an_edit_in_the_same_commit_as_its_event_belongs_to_that_event(store: Store) -> None:
    """An update recorded with its own event (sequence P) is part of the state as of P: the
    version kept is tagged with the event before it."""
    thread = new_thread_id()
    store.messages.append([message(thread, 0)])
    before = _mark(store, thread, "before")
    store.events.update_message(thread, "m0", {"content": "edited"}, event(thread, "edit"))
    edit = store.events.last_sequence(thread)

    assert _contents(store, thread, edit) == [("m0", "edited")]
    assert _contents(store, thread, before) == [("m0", "message 0")]
    with store.database.read() as connection:
        tags = list(
            connection.scalars(
                message_history.select()
                .with_only_columns(message_history.c.at_sequence)
                .where(message_history.c.thread_id == thread)
            )
        )
    assert tags == [before]
