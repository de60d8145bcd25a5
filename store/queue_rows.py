"""The projection of `queue.changed` events into `threads.queue_depth`.

Each `queue.changed` carries the thread's whole queue after the change, so the newest one
of a write says how many queued entries wait; the metrics' queue-depth gauge sums it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, update

from weft.contract.events import Event
from weft.store.tables import threads

QUEUE_CHANGED = "queue.changed"


def project_queue_depth(connection: Connection, stored: Sequence[Event]) -> None:
    """Set each thread's `queue_depth` from its newest `queue.changed` among `stored` (all
    newly stored, in sequence order, in the transaction that stores them)."""
    depths: dict[str, int] = {}
    for event in stored:
        payload = event.payload if isinstance(event.payload, dict) else {}
        queue = payload.get("queue")
        if event.type == QUEUE_CHANGED and isinstance(queue, list):
            depths[event.thread_id] = len(queue)
    for thread_id, depth in depths.items():
        # No row yet (the first messages queue before thread.init writes it): the next
        # change sets it.
        connection.execute(
            update(threads).where(threads.c.thread_id == thread_id).values(queue_depth=depth)
        )
