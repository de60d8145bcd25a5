"""Correlation ids filled in as events are stored (seed 001 envelope).

Two sources, both applied in `insert_events`, the one place every event write passes:
the thread's row gives `session_id` and, for a child thread, `subagent_id`; a stamper the
worker injects gives what only the running code knows (run, attempt, trace and span ids).
The store itself knows nothing of Temporal or OpenTelemetry.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from sqlalchemy import Connection, select

from weft.contract.events import Event
from weft.store.tables import threads
from weft.store.thread_cache_budget import DEFAULT_THREADS

# Fills the ids an event lacks from the code that writes it; returns the event unchanged
# when it knows nothing (the default, and outside any activity or span).
EventStamper = Callable[[Event], Event]


def unchanged(event: Event) -> Event:
    """The stamper of a store nobody gave one."""
    return event


class ThreadLinks:
    """Each thread's session and subagent id, read once from its row (rows do not change
    their session or parent) and kept for at most `max_threads` threads (the worker's
    workflow cache's worth: thread_cache_budget.py), least recently used dropped first."""

    def __init__(self, max_threads: int = DEFAULT_THREADS) -> None:
        self._max_threads = max_threads
        self._known: OrderedDict[str, tuple[str | None, str | None]] = OrderedDict()
        # Events of several threads are stored from the to_thread pool at once.
        self._lock = threading.Lock()

    def fill(self, connection: Connection, thread_id: str, batch: list[Event]) -> list[Event]:
        """`batch` (events of `thread_id`) with missing session and subagent ids from the row.

        A thread without a row yet (before thread.init) keeps what its events carry.
        """
        if all(e.session_id and e.subagent_id for e in batch):
            return batch
        link = self._link(connection, thread_id)
        if link is None:
            return batch
        session_id, subagent_id = link
        return [_with_link(e, session_id, subagent_id) for e in batch]

    def forget(self, thread_id: str) -> None:
        """Drop the thread's link (the workflow cache dropped the thread)."""
        with self._lock:
            self._known.pop(thread_id, None)

    def threads_held(self) -> int:
        """How many threads' links are kept."""
        with self._lock:
            return len(self._known)

    def _link(self, connection: Connection, thread_id: str) -> tuple[str | None, str | None] | None:
        with self._lock:
            known = self._known.get(thread_id)
            if known is not None:
                self._known.move_to_end(thread_id)
                return known
        query = select(threads.c.session_id, threads.c.parent_thread_id).where(
            threads.c.thread_id == thread_id
        )
        row = connection.execute(query).first()
        if row is None:
            return None
        # A child thread's id is the reference its parent registered it under.
        link = (row.session_id, thread_id if row.parent_thread_id else None)
        with self._lock:
            self._known[thread_id] = link
            while len(self._known) > self._max_threads:
                self._known.popitem(last=False)
        return link


def _with_link(event: Event, session_id: str | None, subagent_id: str | None) -> Event:
    changes = {}
    if event.session_id is None and session_id is not None:
        changes["session_id"] = session_id
    if event.subagent_id is None and subagent_id is not None:
        changes["subagent_id"] = subagent_id
    return event.model_copy(update=changes) if changes else event
