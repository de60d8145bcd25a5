"""The subagent registry table, projected from a parent's `subagent.*` events.

The parent workflow owns the registry (Runtime §7.1); each change is an event carrying the
whole entry, and the commit that stores the event upserts the row, so ThreadState lookups
(`children`, `get_child_thread`) read what the events say, and a retried write changes
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Engine, select
from sqlalchemy.dialects import postgresql, sqlite

from activities.store.tables import subagents
from contract.events import Event


def project(connection: Connection, stored: Sequence[Event]) -> None:
    """Upsert the registry rows that newly stored `subagent.*` events describe."""
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    for event in stored:
        entry = (event.payload or {}).get("entry") if event.type.startswith("subagent.") else None
        if not isinstance(entry, dict) or not entry.get("reference") or not event.thread_id:
            continue
        now = datetime.now(UTC)
        values = {
            "parent_thread_id": event.thread_id,
            "reference": str(entry["reference"]),
            "name": str(entry.get("name") or ""),
            "agent": str(entry.get("agent") or ""),
            "status": str(entry.get("status") or "running"),
            "data": entry,
            "created_at": now,
            "updated_at": now,
        }
        insert = dialect.insert(subagents).values(**values)
        connection.execute(
            insert.on_conflict_do_update(
                index_elements=["parent_thread_id", "reference"],
                set_={
                    "name": values["name"],
                    "status": values["status"],
                    "data": entry,
                    "updated_at": now,
                },
            )
        )


def children(engine: Engine, parent_thread_id: str) -> list[dict[str, Any]]:
    """The registry entries of `parent_thread_id`, oldest first."""
    query = (
        select(subagents.c.data)
        .where(subagents.c.parent_thread_id == parent_thread_id)
        .order_by(subagents.c.created_at, subagents.c.reference)
    )
    with engine.connect() as connection:
        return [dict(data) for data in connection.scalars(query)]


def child(engine: Engine, parent_thread_id: str, reference: str) -> dict[str, Any] | None:
    """One registry entry of `parent_thread_id`, by the child's reference, else by name (the
    newest child of that name)."""
    by = subagents.c.parent_thread_id == parent_thread_id
    with engine.connect() as connection:
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
