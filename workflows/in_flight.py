"""The one activity a thread has in flight, so terminate and interrupts can cancel it, and
the `interrupt_turn` standing against the running turn."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TurnStop:
    """An accepted `interrupt_turn`: the turn it stops and why."""

    turn_id: str
    reason: str | None


class InFlight:
    """Tracks the in-flight model or tool activity of the step."""

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self._is_model = False
        # A model or tool call of the turn (a prompt tool's too): `interrupt_turn` cancels
        # it. Compaction and effects are not turn work: they finish and the turn stops after.
        self._is_turn_work = False
        self._interrupted = False
        self._turn_stop: TurnStop | None = None

    def track(
        self, task: asyncio.Task[Any] | None, *, model: bool = False, turn_work: bool = False
    ) -> None:
        """Remember the activity now running (None when it finished)."""
        self._task = task
        self._is_model = model and task is not None
        self._is_turn_work = (model or turn_work) and task is not None

    def cancel(self) -> None:
        """Cancel whatever runs (terminate)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def interrupt_model(self) -> bool:
        """Cancel an in-flight model call for a newer message; False when none runs."""
        if not (self._is_model and self._task):
            return False
        self._interrupted = True
        self._task.cancel()
        return True

    def take_interrupt(self) -> bool:
        """Whether the last model call was cancelled by an interrupt (and forget it)."""
        interrupted, self._interrupted = self._interrupted, False
        return interrupted

    def clear_interrupt(self) -> None:
        self._interrupted = False

    # ---- interrupt_turn ----------------------------------------------------------------

    def stop_turn(self, stop: TurnStop) -> None:
        """Stop the running turn: cancel its model or tool call; the steps check `turn_stop`."""
        self._turn_stop = stop
        if self._is_turn_work and self._task is not None and not self._task.done():
            self._task.cancel()

    @property
    def turn_stop(self) -> TurnStop | None:
        """The interrupt standing against the running turn, if one was accepted."""
        return self._turn_stop

    def turn_ended(self) -> None:
        """The turn is over: an interrupt accepted for it no longer applies."""
        self._turn_stop = None
