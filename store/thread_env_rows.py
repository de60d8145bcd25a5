"""What a tool's ThreadState reads of its thread's row (the user and the thread's own env),
kept per worker between tool calls.

Every tool call read the row in a transaction and a thread hop of its own before the tool
ran, about a millisecond of a quick step, to learn two things that rarely change. Only
`set_env` changes them after the thread starts, and the workflow counts every `set_env` it
applies (`Counters.env_writes`) and hands the count to each tool call. The caller keys a
copy by a version: the workflow run and that count (a thread id used again by a new
thread is a new run; a continued run reads the row once more). A copy kept at a version is
still what the row holds, with two exceptions that go to the row:

- a retried attempt (its failed attempt may have set env the workflow never heard of):
  the caller passes no version;
- a `set_env` made in this worker whose intent the workflow has not applied yet (a
  sibling tool of the same step): the write drops this worker's copy.

A `set_env` on another worker that the workflow has not applied yet is not seen, as a
sibling tool running a moment earlier would not have seen it either.
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from weft.store.thread_cache_budget import DEFAULT_THREADS


@dataclass(frozen=True)
class ThreadEnvRow:
    """The thread row's fields a ThreadState reads: its user and its own env layer."""

    user_id: str | None
    env: dict[str, Any] = field(default_factory=dict)


class ThreadEnvRows:
    """Each thread's `ThreadEnvRow`, as read at a version its caller names; at most
    `max_threads` threads' (the worker's workflow cache's worth: thread_cache_budget.py),
    least recently used dropped first."""

    def __init__(self, max_threads: int = DEFAULT_THREADS) -> None:
        self._max_threads = max_threads
        self._rows: OrderedDict[str, tuple[Hashable, ThreadEnvRow]] = OrderedDict()
        # Tool calls of several threads read and fill it from the to_thread pool at once.
        self._lock = threading.Lock()

    def get(self, thread_id: str, version: Hashable | None) -> ThreadEnvRow | None:
        """The copy kept at `version`, or None (none kept, another version, or None)."""
        if version is None:
            return None
        with self._lock:
            kept = self._rows.get(thread_id)
            if kept is None or kept[0] != version:
                return None
            self._rows.move_to_end(thread_id)
            row = kept[1]
        # Each caller gets its own env: a tool may change a value it was handed.
        return ThreadEnvRow(user_id=row.user_id, env=copy.deepcopy(row.env))

    def keep(self, thread_id: str, version: Hashable | None, row: ThreadEnvRow) -> None:
        """Remember `row`, read at `version` (None: do not)."""
        if version is None:
            return
        kept = ThreadEnvRow(user_id=row.user_id, env=copy.deepcopy(row.env))
        with self._lock:
            self._rows[thread_id] = (version, kept)
            self._rows.move_to_end(thread_id)
            while len(self._rows) > self._max_threads:
                self._rows.popitem(last=False)

    def forget(self, thread_id: str) -> None:
        """Drop the thread's copy: its row's env has just changed, or the workflow cache
        dropped the thread."""
        with self._lock:
            self._rows.pop(thread_id, None)

    def threads_held(self) -> int:
        """How many threads' rows are kept."""
        with self._lock:
            return len(self._rows)
