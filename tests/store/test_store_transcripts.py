"""The cached main transcript: tail reads when only appends happened, a full read otherwise."""

from __future__ import annotations

import gc

from store_factories import event, message, new_thread_id, tool_call

from weft.activities.context_window import Frame, build_window
from weft.activities.message_views import MessageViews
from weft.contract.definitions import PromptDef
from weft.contract.messages import Message
from weft.store import Store
from weft.store.database import Database
from weft.store.transcripts import Transcripts


def _ids(messages: list[Message]) -> list[str]:
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


def _tool_loop(thread: str, steps: int, start: int = 0) -> list[Message]:
    """`steps` assistant tool calls, each with its result: the shape of a long agent run."""
    rows = []
    for step in range(start, start + steps):
        call = tool_call(f"call-{step}", "add")
        rows.append(message(thread, 2 * step, role="assistant", content=None, tool_calls=[call]))
        rows.append(
            message(thread, 2 * step + 1, role="tool", tool_call_id=call.id, content='{"r": 1}')
        )
    return rows


def test_kept_transcripts_and_parts_hold_few_objects_the_collector_walks(
    sqlite_store: Store,
) -> None:
    """A worker keeps long transcripts for many threads; each full garbage collection walks
    every object it tracks. Kept as JSON texts (untracked) with wire parts of plain values,
    this tool loop's messages cost it 2.5 objects each (a tool call's part holds a list and
    dicts; a tool result's part none); kept as `Message`s with their views, 11.5."""
    views = MessageViews()
    frame = Frame(
        prompt=PromptDef(name="p", tool_description="p", model="m", prompt="."),
        system=".",
        tools=[],
        dual=False,
    )

    def read(thread: str) -> None:
        texts = sqlite_store.transcripts.texts_since(thread, 0)
        build_window(frame, None, [], texts, side="a", cap=1000, views=views)

    warm, thread = new_thread_id(), new_thread_id()
    sqlite_store.messages.append(_tool_loop(warm, 10))
    read(warm)  # statement caches and first-use state
    sqlite_store.messages.append(_tool_loop(thread, 200))
    gc.collect()
    before = len(gc.get_objects())
    read(thread)
    read(thread)
    gc.collect()
    kept = len(gc.get_objects()) - before
    assert sqlite_store.transcripts.stats.rows_loaded == 20 + 400
    assert kept / 400 < 4, f"{kept} tracked objects kept for 400 messages"


def test_the_cached_read_returns_what_the_store_holds(store: Store) -> None:
    """The transcript is read on the driver's cursor, not through Core: every field comes
    back as Core reads it, on both backends (JSON columns, booleans, nulls)."""
    thread = new_thread_id()
    full = message(
        thread,
        0,
        role="assistant",
        content="ünïcode ✓",
        name="helper",
        tool_calls=[tool_call("call-1", "add")],
        silent=True,
        tool_status="success",
        reasoning_content="why",
        attachments=["file-1", "file-2"],
        metadata={"model": "m", "nested": {"list": [1, 2.5, None, True], "text": "x"}},
        side="b",
        turn_id="turn-1",
        status="failed",
    )
    bare = message(thread, 1, content=None)
    store.messages.append([full, bare])
    assert store.transcripts.since(thread, 0) == store.messages.list(thread) == [full, bare]
