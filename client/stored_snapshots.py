"""The read models a thread wrote into its event log (`snapshot.updated`, by `kind`), for
the clients that read a closed thread from the store."""

from __future__ import annotations

from weft.contract.events import Event
from weft.store.protocols import HasEvents


def stored_snapshot(store: HasEvents, thread_id: str, kind: str) -> Event | None:
    """The last `snapshot.updated` of `kind` the thread wrote, or None."""
    latest: Event | None = None
    cursor = 0
    while batch := store.events.read(thread_id, after=cursor, types=["snapshot.updated"]):
        cursor = batch[-1].sequence or cursor
        latest = next((e for e in reversed(batch) if (e.payload or {}).get("kind") == kind), latest)
    return latest
