"""Correlation ids filled in as events are stored (seed 001 envelope).

Two sources, both applied in `insert_events`, the one place every event write passes:
the thread's row gives `session_id` and, for a child thread, `subagent_id`; a stamper the
worker injects gives what only the running code knows (run, attempt, trace and span ids).
The store itself knows nothing of Temporal or OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Connection, select

from weft.contract.events import Event
from weft.store.tables import threads

# Fills the ids an event lacks from the code that writes it; returns the event unchanged
# when it knows nothing (the default, and outside any activity or span).
EventStamper = Callable[[Event], Event]

# Thread links kept in memory: rows do not change their session or parent.
_MAX_KNOWN_THREADS = 10_000


def unchanged(event: Event) -> Event:
    """The stamper of a store nobody gave one."""
    return event


class ThreadLinks:
    """Each thread's session and subagent id, read once from its row."""

    def __init__(self) -> None:
        self._known: dict[str, tuple[str | None, str | None]] = {}

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

    def _link(self, connection: Connection, thread_id: str) -> tuple[str | None, str | None] | None:
        if thread_id in self._known:
            return self._known[thread_id]
        query = select(threads.c.session_id, threads.c.parent_thread_id).where(
            threads.c.thread_id == thread_id
        )
        row = connection.execute(query).first()
        if row is None:
            return None
        if len(self._known) >= _MAX_KNOWN_THREADS:
            self._known.clear()
        # A child thread's id is the reference its parent registered it under.
        link = (row.session_id, thread_id if row.parent_thread_id else None)
        self._known[thread_id] = link
        return link


def _with_link(event: Event, session_id: str | None, subagent_id: str | None) -> Event:
    changes = {}
    if event.session_id is None and session_id is not None:
        changes["session_id"] = session_id
    if event.subagent_id is None and subagent_id is not None:
        changes["subagent_id"] = subagent_id
    return event.model_copy(update=changes) if changes else event
