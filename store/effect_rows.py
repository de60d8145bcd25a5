"""Effect rows projected from `job.*` events (read by `store/effects.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection

from weft.contract.effects import JOB_KIND
from weft.contract.events import Event
from weft.store.database import Database
from weft.store.tables import effects

# The status each `job.*` event of an effect leaves it in.
STATUS_OF_EVENT = {
    "job.created": "pending",
    "job.started": "running",
    "job.completed": "completed",
    "job.failed": "failed",
    "job.cancelled": "removed",
}


def project_effects(database: Database, connection: Connection, stored: Sequence[Event]) -> None:
    """Upsert the effect rows that newly stored `job.*` events of effects describe, in the
    transaction that stores them."""
    for event in stored:
        status = STATUS_OF_EVENT.get(event.type)
        payload = event.payload if isinstance(event.payload, dict) else {}
        effect = payload.get("effect")
        if status is None or payload.get("kind") != JOB_KIND or not isinstance(effect, dict):
            continue
        now = datetime.now(UTC)
        insert = database.insert(effects).values(
            thread_id=event.thread_id,
            effect_id=str(effect["id"]),
            name=str(effect.get("name") or ""),
            status=status,
            scheduled_at=str(effect.get("scheduledAt") or ""),
            data=effect,
            result=None,
            updated_at=now,
        )
        connection.execute(
            insert.on_conflict_do_update(
                index_elements=["thread_id", "effect_id"],
                set_={"status": status, "data": effect, "updated_at": now},
            )
        )
