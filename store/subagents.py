"""The subagent rows of each parent thread, projected from its `subagent.*` events.

The parent workflow owns its subagent registry (Runtime §7.1); each change is an event
carrying the whole entry, and the commit that stores the event upserts the row, so
ThreadState lookups (`children`, `get_child_thread`) read what the events say, and a
retried write changes nothing.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, select

from weft.contract.events import Event
from weft.store.database import Database
from weft.store.tables import subagents, tasks

# A subagent entry as its events carry it (`contract.subagents.SubagentEntry`, as JSON).
SubagentEntry = dict[str, Any]


class Subagents:
    """Read the subagent rows of a parent thread; rows are written by `project_subagents`."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def list(self, parent_thread_id: str) -> builtins.list[SubagentEntry]:
        """The entries of `parent_thread_id`'s subagents, oldest first."""
        query = (
            select(subagents.c.data)
            .where(subagents.c.parent_thread_id == parent_thread_id)
            .order_by(subagents.c.created_at, subagents.c.reference)
        )
        with self._db.read() as connection:
            return [dict(data) for data in connection.scalars(query)]

    def find(self, parent_thread_id: str, reference: str) -> SubagentEntry | None:
        """One subagent of `parent_thread_id`, by the child's reference, else by name (the
        newest child of that name)."""
        by = subagents.c.parent_thread_id == parent_thread_id
        with self._db.read() as connection:
            data = connection.scalar(
                select(subagents.c.data).where(by, subagents.c.reference == reference)
            )
            if data is None:
                data = connection.scalar(
                    select(subagents.c.data)
                    .where(by, subagents.c.name == reference)
                    .order_by(subagents.c.created_at.desc(), subagents.c.reference.desc())
                    .limit(1)
                )
        return dict(data) if data is not None else None

    def tasks_created_by(self, thread_ids: Sequence[str]) -> builtins.list[dict[str, Any]]:
        """The task records whose `scope.threadId` is one of `thread_ids` (the tasks those
        threads created with the task tools), oldest first: read by the indexed
        `created_by_thread` column, written with the row at the task's creation."""
        if not thread_ids:
            return []
        query = (
            select(tasks.c.data)
            .where(tasks.c.created_by_thread.in_(list(thread_ids)))
            .order_by(tasks.c.created_at, tasks.c.task_id)
        )
        with self._db.read() as connection:
            return [dict(data) for data in connection.scalars(query)]


# Events of these types carry a subagent entry, projected into the subagents table.
SUBAGENT_EVENT_PREFIX = "subagent."


def project_subagents(database: Database, connection: Connection, stored: Sequence[Event]) -> None:
    """Upsert the subagent rows that newly stored `subagent.*` events describe, in the
    transaction that stores them."""
    for event in stored:
        entry = (
            (event.payload or {}).get("entry")
            if event.type.startswith(SUBAGENT_EVENT_PREFIX)
            else None
        )
        if not isinstance(entry, dict) or not entry.get("reference") or not event.thread_id:
            continue
        now = datetime.now(UTC)
        name = str(entry.get("name") or "")
        status = str(entry.get("status") or "running")
        insert = database.insert(subagents).values(
            parent_thread_id=event.thread_id,
            reference=str(entry["reference"]),
            name=name,
            agent=str(entry.get("agent") or ""),
            status=status,
            data=entry,
            created_at=now,
            updated_at=now,
        )
        connection.execute(
            insert.on_conflict_do_update(
                index_elements=["parent_thread_id", "reference"],
                set_={"name": name, "status": status, "data": entry, "updated_at": now},
            )
        )
