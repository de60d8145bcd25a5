"""A thread's scheduled effects, projected from their `job.*` events.

The workflow owns the effects (their timers); each change is an event carrying the whole
effect, and the commit that stores the event upserts the row, so `get_scheduled_effects`
reads what the events say. A finished run stores its outcome here together with the
effect's staged writes (values and events) in one commit: a retried `effect.run` finds
the outcome and does not run the effect again (docs/effects.md).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update

from weft.activities.crypto import Keyring
from weft.contract.events import Event
from weft.store.database import Database
from weft.store.events import events_by_thread, insert_events
from weft.store.sealed import seal, unseal
from weft.store.tables import effects
from weft.store.values import write_value


@dataclass(frozen=True)
class EffectRow:
    """One effect as stored: its status, the effect (JSON) and a finished run's outcome."""

    status: str
    effect: dict[str, Any]
    result: dict[str, Any] | None


class Effects:
    """Read a thread's effects; rows are written by the events that describe them."""

    def __init__(self, database: Database, keyring: Keyring | None = None) -> None:
        self._db = database
        self._keyring = keyring

    def pending(self, thread_id: str, name: str | None = None) -> builtins.list[dict[str, Any]]:
        """The thread's pending effects (`ScheduledEffect` JSON), soonest due first."""
        query = select(effects.c.data).where(
            effects.c.thread_id == thread_id, effects.c.status == "pending"
        )
        if name is not None:
            query = query.where(effects.c.name == name)
        query = query.order_by(effects.c.scheduled_at, effects.c.effect_id)
        with self._db.read() as connection:
            return [dict(data) for data in connection.scalars(query)]

    def get(self, thread_id: str, effect_id: str) -> EffectRow | None:
        """One effect, whatever its status, or None."""
        query = select(effects.c.status, effects.c.data, effects.c.result).where(
            effects.c.thread_id == thread_id, effects.c.effect_id == effect_id
        )
        with self._db.read() as connection:
            row = connection.execute(query).first()
        if row is None:
            return None
        result = None
        if row.result:
            result = unseal(
                dict(row.result), self._keyring, bound_to=_bound_to(thread_id, effect_id)
            )
        return EffectRow(row.status, dict(row.data), result)

    def finish(
        self,
        thread_id: str,
        effect_id: str,
        *,
        result: dict[str, Any],
        values: Mapping[str, str | None],
        events: Sequence[Event],
    ) -> None:
        """Commit a run's outcome with its staged writes: encoded values (None deletes) and
        events (the last one `job.completed` or `job.failed`), all or nothing."""
        with self._db.write() as connection:
            for key, encoded in values.items():
                write_value(self._db, connection, thread_id, key, encoded)
            insert_events(self._db, connection, events_by_thread(events))
            connection.execute(
                update(effects)
                .where(effects.c.thread_id == thread_id, effects.c.effect_id == effect_id)
                .values(
                    # Sealed like thread env: its intents may carry a set_env secret.
                    result=seal(result, self._keyring, bound_to=_bound_to(thread_id, effect_id)),
                    updated_at=datetime.now(UTC),
                )
            )


def _bound_to(thread_id: str, effect_id: str) -> str:
    return f"effect:{thread_id}:{effect_id}"
