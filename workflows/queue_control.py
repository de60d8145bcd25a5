"""Queue edits from the control plane: remove, promote, reject and interrupt.

Each edit records `queue.changed` with the queue as it is afterwards, so a client can
rebuild the queue from events alone.
"""

from __future__ import annotations

from contract.messages import SubmitTurnResult
from workflows.thread_state import QueueEntry, ThreadMemory


def remove(mem: ThreadMemory, queue_id: str) -> str | None:
    """Drop a queued turn; an error text when there is no such entry."""
    entry = _find(mem, queue_id)
    if entry is None:
        return _unknown(mem, queue_id)
    mem.queue.remove(entry)
    _changed(mem, "removed", entry)
    return None


def promote(mem: ThreadMemory, queue_id: str) -> str | None:
    """Move a queued turn to the front of the queue."""
    entry = _find(mem, queue_id)
    if entry is None:
        return _unknown(mem, queue_id)
    mem.queue.remove(entry)
    mem.queue.appendleft(entry)
    _changed(mem, "promoted", entry)
    return None


def reject(mem: ThreadMemory, active_turn: str | None, status: str) -> SubmitTurnResult:
    """Refuse a `submit_turn` with policy `reject` because the thread is busy."""
    reason = (
        f"policy 'reject': the thread is busy ({status}"
        + (f", turn {active_turn}" if active_turn else "")
        + (f", {len(mem.queue)} queued" if mem.queue else "")
        + ")"
    )
    turn_id = mem.new_id("turn")
    mem.emit(
        "queue.changed",
        {"action": "rejected", "reason": reason, "queue": mem.queue_snapshot()},
        turn_id=turn_id,
    )
    return SubmitTurnResult(turn_id=turn_id, status="rejected", reason=reason)


def interrupted(mem: ThreadMemory, entry: QueueEntry, active_turn: str | None) -> None:
    """Record that `entry` cancelled the in-flight model call of `active_turn`."""
    _changed(mem, "interrupt", entry, interruptedTurnId=active_turn)


def _changed(mem: ThreadMemory, action: str, entry: QueueEntry, **extra: object) -> None:
    mem.emit(
        "queue.changed",
        {"action": action, "queueId": entry.queue_id, "queue": mem.queue_snapshot(), **extra},
        queue_id=entry.queue_id,
    )


def _find(mem: ThreadMemory, queue_id: str) -> QueueEntry | None:
    return next((e for e in mem.queue if e.queue_id == queue_id), None)


def _unknown(mem: ThreadMemory, queue_id: str) -> str:
    queued = ", ".join(e.queue_id for e in mem.queue) or "none"
    return f"no queued turn {queue_id!r}; queued: {queued}"
