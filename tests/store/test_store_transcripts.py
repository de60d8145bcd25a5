"""The cached main transcript: tail reads when only appends happened, a full read otherwise."""

from __future__ import annotations

from store_factories import event, message, new_thread_id, tool_call

from weft.activities.store import Store
from weft.activities.store.database import Database
from weft.activities.store.transcripts import Transcripts


def _ids(messages: list) -> list[str]:
    return [m.id for m in messages]


def test_appends_are_read_as_a_tail(store: Store) -> None:
    """After the first read, each read loads only the rows appended since."""
    thread = new_thread_id()
    store.messages.append([message(thread, p) for p in range(5)])
    assert _ids(store.transcripts.since(thread, 0)) == ["m0", "m1", "m2", "m3", "m4"]
    for position in range(5, 8):
        store.messages.append([message(thread, position)])
        assert _ids(store.transcripts.since(thread, 0))[-1] == f"m{position}"
    stats = store.transcripts.stats
    assert (stats.misses, stats.hits, stats.rows_loaded) == (1, 3, 8)


def test_an_update_or_delete_forces_a_full_read(store: Store) -> None:
    """Edits bump the thread's revision, so the cached copy is not trusted."""
    thread = new_thread_id()
    store.messages.append([message(thread, p) for p in range(3)])
    store.transcripts.since(thread, 0)
    store.messages.update(thread, "m1", content="edited")
    assert [m.content for m in store.transcripts.since(thread, 0)][1] == "edited"
    store.events.delete_message(thread, "m2", event(thread, "deleted-m2", "message.deleted"))
    assert _ids(store.transcripts.since(thread, 0)) == ["m0", "m1"]
    assert store.transcripts.stats.misses == 3


def test_a_message_stored_before_the_tail_forces_a_full_read(store: Store) -> None:
    """A row written at an earlier position (a stale attempt) changes the count, not the tail."""
    thread = new_thread_id()
    store.messages.append([message(thread, 0), message(thread, 2)])
    store.transcripts.since(thread, 0)
    store.messages.append([message(thread, 1)])
    assert _ids(store.transcripts.since(thread, 0)) == ["m0", "m1", "m2"]
    assert store.transcripts.stats.misses == 2


def test_a_later_boundary_trims_and_an_earlier_one_rereads(store: Store) -> None:
    """Compaction moves the first position on: the copy drops what it no longer needs."""
    thread = new_thread_id()
    store.messages.append([message(thread, p) for p in range(6)])
    store.transcripts.since(thread, 0)
    assert _ids(store.transcripts.since(thread, 3)) == ["m3", "m4", "m5"]
    assert store.transcripts.stats.misses == 1
    assert _ids(store.transcripts.since(thread, 1)) == ["m1", "m2", "m3", "m4", "m5"]
    assert store.transcripts.stats.misses == 2


def test_nested_messages_are_not_part_of_it(store: Store) -> None:
    """A prompt tool's own messages (depth > 0) never join the main transcript."""
    thread = new_thread_id()
    call = tool_call("call-1")
    store.messages.append(
        [
            message(thread, 0),
            message(thread, 1, id="nested", depth=1, parent_id=call.id),
            message(thread, 2),
        ]
    )
    assert _ids(store.transcripts.since(thread, 0)) == ["m0", "m2"]
    store.messages.append([message(thread, 3, id="nested2", depth=1, parent_id=call.id)])
    assert _ids(store.transcripts.since(thread, 0)) == ["m0", "m2"]
    assert store.transcripts.stats.misses == 1


def test_a_second_worker_sees_what_the_first_appended_and_edited(store: Store) -> None:
    """Two workers' caches over one database stay true (a thread moving between them)."""
    other = Transcripts(Database(store.engine))
    thread = new_thread_id()
    store.messages.append([message(thread, 0)])
    assert _ids(store.transcripts.since(thread, 0)) == _ids(other.since(thread, 0)) == ["m0"]
    store.messages.append([message(thread, 1)])
    store.messages.update(thread, "m0", content="edited elsewhere")
    assert [m.content for m in other.since(thread, 0)] == ["edited elsewhere", "message 1"]


def test_the_cache_is_bounded(sqlite_store: Store) -> None:
    """Least recently read threads are dropped past the thread and character budgets."""
    small = Transcripts(sqlite_store.database, max_threads=2, max_chars=10_000)
    threads = [new_thread_id() for _ in range(3)]
    for thread in threads:
        sqlite_store.messages.append([message(thread, 0)])
        small.since(thread, 0)
    small.since(threads[0], 0)  # dropped when the third was read: a full read again
    assert small.stats.misses == 4
    big = new_thread_id()
    sqlite_store.messages.append([message(big, 0, content="x" * 20_000)])
    small.since(big, 0)
    small.since(big, 0)
    assert small.stats.misses == 6  # over the character budget, so never kept
