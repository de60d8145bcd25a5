"""A thread's context compaction boundaries: written once per id, with their events.

`context.compact` may be retried after its boundary was committed; the boundary id is the
idempotency key, so a retry gets the boundary already stored (not the one it just built)
and writes no events, and the thread ends up with exactly one boundary per compaction.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from sqlalchemy import Connection, func, select

from weft.contract.context import ContextBoundary
from weft.contract.events import Event
from weft.store.database import Database
from weft.store.events import events_by_thread, insert_events
from weft.store.rows import boundary_to_row, row_to_boundary
from weft.store.tables import context_boundaries


class Boundaries:
    """Boundaries keyed by (thread_id, boundary_id), in the order each thread wrote them."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def add(self, boundary: ContextBoundary, events_: Sequence[Event] = ()) -> ContextBoundary:
        """Store `boundary` and `events_` in one transaction; return the stored boundary.

        When the thread already has a boundary with this id, nothing is written and that
        boundary is returned. Events are numbered and deduplicated as `store.events` does.
        """
        by_thread = events_by_thread(events_)
        return self._db.retrying(lambda: self._add_once(boundary, by_thread))

    def get(self, thread_id: str, boundary_id: str) -> ContextBoundary | None:
        """One boundary, or None when the thread has none with that id."""
        with self._db.read() as connection:
            return boundary_in(connection, thread_id, boundary_id)

    def latest(self, thread_id: str) -> ContextBoundary | None:
        """The thread's most recently written boundary, or None."""
        query = (
            select(context_boundaries.c.data)
            .where(context_boundaries.c.thread_id == thread_id)
            .order_by(context_boundaries.c.ordinal.desc())
            .limit(1)
        )
        with self._db.read() as connection:
            data = connection.scalar(query)
        return None if data is None else row_to_boundary(data)

    def list(self, thread_id: str) -> builtins.list[ContextBoundary]:
        """The thread's boundaries, oldest first."""
        query = (
            select(context_boundaries.c.data)
            .where(context_boundaries.c.thread_id == thread_id)
            .order_by(context_boundaries.c.ordinal)
        )
        with self._db.read() as connection:
            return [row_to_boundary(data) for data in connection.scalars(query)]

    def _add_once(
        self, boundary: ContextBoundary, by_thread: dict[str, builtins.list[Event]]
    ) -> ContextBoundary:
        with self._db.write() as connection:
            # Every thread written here is locked up front in one sorted order (the events'
            # order too), so this writer and an events writer cannot deadlock.
            for thread_id in sorted({boundary.thread_id, *by_thread}):
                self._db.lock_thread(connection, thread_id)
            stored = boundary_in(connection, boundary.thread_id, boundary.boundary_id)
            if stored is not None:
                return stored
            last = connection.scalar(
                select(func.max(context_boundaries.c.ordinal)).where(
                    context_boundaries.c.thread_id == boundary.thread_id
                )
            )
            row = boundary_to_row(boundary, int(last or 0) + 1)
            connection.execute(context_boundaries.insert(), [row])
            insert_events(self._db, connection, by_thread)
            return boundary


def boundary_in(connection: Connection, thread_id: str, boundary_id: str) -> ContextBoundary | None:
    """One boundary as `connection`'s transaction sees it, or None."""
    query = select(context_boundaries.c.data).where(
        context_boundaries.c.thread_id == thread_id,
        context_boundaries.c.boundary_id == boundary_id,
    )
    data = connection.scalar(query)
    return None if data is None else row_to_boundary(data)
