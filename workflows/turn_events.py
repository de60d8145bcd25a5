"""The turn events: each written once, with the fact the turn book learns from it.

A turn starts with `turn.started` and ends with `turn.completed` or `turn.failed`, whatever
path ends it; callers waiting for a turn (`TurnBook`) are told the typed fact here, never
by reading back the payload.
"""

from __future__ import annotations

from typing import Any, Protocol

from weft.contract.events import Event
from weft.contract.thread import StopReason
from weft.workflows.turn_book import TurnBook, TurnFacts


class TurnLog(TurnFacts, Protocol):
    """What writing a turn event needs of the thread (ThreadMemory)."""

    turns: TurnBook

    def emit(self, event_type: str, payload: Any = None, **ids: Any) -> Event: ...


def turn_started(log: TurnLog, turn_id: str, payload: dict[str, Any]) -> None:
    log.turns.started(log)
    log.emit("turn.started", payload, turn_id=turn_id)


def turn_completed(log: TurnLog, turn_id: str, stop: StopReason, payload: dict[str, Any]) -> None:
    """The turn ended for `stop`; `payload` says how (its `stopReason` is `stop`)."""
    event = log.emit("turn.completed", payload, turn_id=turn_id)
    log.turns.completed(turn_id, event.event_id, stop, log)


def turn_failed(
    log: TurnLog, turn_id: str, reason: StopReason | None, facts: dict[str, Any] | None = None
) -> None:
    """The turn failed (or was aborted) for `reason`, with what the thread knows of why."""
    event = log.emit("turn.failed", {"reason": reason, **(facts or {})}, turn_id=turn_id)
    log.turns.failed(turn_id, event.event_id, reason, log)
