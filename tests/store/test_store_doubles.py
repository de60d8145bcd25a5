"""The in-memory doubles (tests/store_doubles.py) answer as the real store does, so a unit
test over a double tests what the code does over the store."""

from __future__ import annotations

import pytest
from store_doubles import MemoryStore
from store_factories import message, new_thread_id

from weft.store import Store
from weft.store.protocols import HasMessages


@pytest.fixture(params=["sqlite", "memory"])
def messages_of(request: pytest.FixtureRequest) -> HasMessages:
    """The real SQLite store, then the double."""
    if request.param == "memory":
        return MemoryStore()
    sqlite_store: Store = request.getfixturevalue("sqlite_store")
    return sqlite_store


def test_messages_are_read_back_by_id_and_by_position(messages_of: HasMessages) -> None:
    """get, get_many and list (after, before, limit) agree between the store and the double."""
    thread, other = new_thread_id(), new_thread_id()
    written = [message(thread, position) for position in (2, 0, 1, 3)]
    store = messages_of.messages
    store.append([*written, message(other, 0)])
    store.append(written[:1])
    by_position = sorted(written, key=lambda m: m.position)
    assert store.get(thread, written[0].id) == written[0]
    assert store.get(thread, "ghost") is None
    assert store.list(thread) == by_position
    assert store.list(thread, after_position=0, before_position=3) == by_position[1:3]
    assert store.list(thread, limit=2) == by_position[:2]
    ids = [written[3].id, written[1].id, "ghost"]
    assert store.get_many(thread, ids) == [by_position[0], by_position[3]]
