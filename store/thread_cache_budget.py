"""How much of each thread a worker keeps in memory between its activities: as many threads
as its workflow cache holds.

A worker keeps several things per thread so that a warm thread's step reads and works out
only what is new: its transcript (transcripts.py), its env row (thread_env_rows.py), its
session and subagent ids (correlation.py), its frames, message views and last window
(activities/context_window.py, activities/message_views.py). Each is worth keeping only
while the thread is in the workflow cache (`max_cached_workflows`): a thread the cache
has dropped replays its history on its next task anyway, and one more read of its
transcript is a small part of that. Sized by fixed counts, these caches kept thousands of
idle threads the workflow cache had long dropped, a few KiB each.

`ThreadCacheBudget` is the one number they are all sized from, and the one place the
worker reports a dropped thread: each cache joins the budget with its `forget`, and the
worker's workflow runner calls `evicted` when the SDK evicts a run (workers/
workflow_runner.py), so a dropped thread leaves nothing behind. The bound by count still
holds when an activity runs for a thread after its eviction.
"""

from __future__ import annotations

import threading
from typing import Protocol

# The SDK's default workflow cache, and so what a store built outside a worker keeps.
DEFAULT_THREADS = 1000
# The fewest threads kept, whatever the workflow cache: a worker with no workflow cache
# (`max_cached_workflows=0`) still runs several threads' activities at once.
MIN_THREADS = 8


class ThreadCache(Protocol):
    """A cache that keeps something per thread."""

    def forget(self, thread_id: str) -> None:
        """Drop everything kept of the thread."""

    def threads_held(self) -> int:
        """How many threads it keeps something of."""


class ThreadCacheBudget:
    """How many threads each per-thread cache of a worker keeps, and the caches to tell
    when the workflow cache drops one."""

    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        self.threads = max(threads, MIN_THREADS)
        self._caches: list[tuple[str, ThreadCache]] = []
        self._lock = threading.Lock()

    def per_thread(self, amount: int) -> int:
        """`amount` (of messages, frames, …) for each thread the budget keeps, in all."""
        return self.threads * amount

    def join(self, name: str, cache: ThreadCache) -> None:
        """Have `cache` forget each thread the workflow cache drops; `name` is what
        `held` reports it as (caches of one name are summed)."""
        with self._lock:
            self._caches.append((name, cache))

    def evicted(self, thread_id: str) -> None:
        """The workflow cache dropped the thread's run: every cache forgets the thread."""
        with self._lock:
            caches = list(self._caches)
        for _, cache in caches:
            cache.forget(thread_id)

    def held(self) -> dict[str, int]:
        """How many threads each cache keeps something of, by name (tests, benchmarks)."""
        with self._lock:
            caches = list(self._caches)
        held: dict[str, int] = {}
        for name, cache in caches:
            held[name] = held.get(name, 0) + cache.threads_held()
        return held
