"""What tool calls read of a thread's row (its user and env), kept per worker between them
(store/thread_env_rows.py), against the real row on each backend."""

from __future__ import annotations

from typing import Any

from store_factories import event, new_thread_id, running_thread

from weft.contract.thread_env import EnvEntry
from weft.store import Store
from weft.store.thread_env_rows import ThreadEnvRow, ThreadEnvRows

RUN = "run-1"


def _thread(store: Store) -> str:
    thread = new_thread_id()
    store.threads.upsert(
        running_thread(thread, user_id="u1", env={"REGION": {"value": "eu", "type": "text"}})
    )
    return thread


def _set(store: Store, thread: str, name: str, value: str, n: int) -> None:
    change = event(thread, f"call_x:setenv{n}", "thread.updated", payload={"envSet": {}})
    store.threads.set_env(thread, name, EnvEntry(value=value), change)


def _region(row: ThreadEnvRow | None) -> object:
    assert row is not None
    return row.env["REGION"]["value"]


def test_a_copy_is_used_at_its_version_only(store: Store) -> None:
    """Read once at (run, 0), then kept: another worker's set_env changes the row, and the
    next version (the workflow counted the write) reads it; no version always reads."""
    thread = _thread(store)
    first = store.threads.env_row(thread, (RUN, 0))
    assert first == ThreadEnvRow(user_id="u1", env={"REGION": {"value": "eu", "type": "text"}})
    other_worker = Store(store.engine)
    _set(other_worker, thread, "REGION", "us", 1)
    # Before the workflow applies the intent, this worker still has its copy (documented:
    # a sibling tool running a moment earlier would not have seen the write either).
    assert _region(store.threads.env_rows.get(thread, (RUN, 0))) == "eu"
    assert store.threads.env_rows.get(thread, (RUN, 1)) is None
    assert _region(store.threads.env_row(thread, (RUN, 1))) == "us"
    assert _region(store.threads.env_rows.get(thread, (RUN, 1))) == "us"
    # A new run of the same thread id (or a continued run) reads the row again.
    assert store.threads.env_rows.get(thread, ("run-2", 1)) is None
    # No version (a retried attempt): the row, every time, and nothing kept.
    _set(other_worker, thread, "REGION", "ap", 2)
    assert _region(store.threads.env_row(thread, None)) == "ap"
    assert _region(store.threads.env_rows.get(thread, (RUN, 1))) == "us"


def test_this_workers_set_env_drops_its_copy(store: Store) -> None:
    """A sibling tool on this worker, at the same count, sees a value set here at once."""
    thread = _thread(store)
    assert _region(store.threads.env_row(thread, (RUN, 0))) == "eu"
    _set(store, thread, "REGION", "us", 1)
    assert store.threads.env_rows.get(thread, (RUN, 0)) is None
    assert _region(store.threads.env_row(thread, (RUN, 0))) == "us"


def test_a_thread_without_a_row_has_nothing_kept(store: Store) -> None:
    assert store.threads.env_row("thread-none", (RUN, 0)) is None
    assert store.threads.env_rows.get("thread-none", (RUN, 0)) is None


def test_each_caller_gets_its_own_env_and_the_oldest_thread_goes_first() -> None:
    """A tool changing a value it was handed changes no one else's; the copies are bounded."""
    rows = ThreadEnvRows(max_threads=2)
    handed: dict[str, dict[str, Any]] = {"LIST": {"value": [1], "type": "text"}}
    rows.keep("t1", (RUN, 0), ThreadEnvRow(user_id=None, env=handed))
    handed["LIST"]["value"].append(2)
    first = rows.get("t1", (RUN, 0))
    assert first is not None and first.env["LIST"]["value"] == [1]
    first.env["LIST"]["value"].append(3)
    again = rows.get("t1", (RUN, 0))
    assert again is not None and again.env["LIST"]["value"] == [1]
    rows.keep("t2", (RUN, 0), ThreadEnvRow(user_id=None))
    assert rows.get("t1", (RUN, 0)) is not None  # t1 was used last: t2 is the oldest
    rows.keep("t3", (RUN, 0), ThreadEnvRow(user_id=None))
    assert rows.get("t2", (RUN, 0)) is None
    assert rows.get("t1", (RUN, 0)) is not None and rows.get("t3", (RUN, 0)) is not None
    rows.keep("t4", (RUN, 0), ThreadEnvRow(user_id=None))
    rows.forget("t4")
    assert rows.get("t4", (RUN, 0)) is None
