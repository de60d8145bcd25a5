"""The one activity a thread has in flight, so terminate and interrupt can cancel it."""

from __future__ import annotations

import asyncio
from typing import Any


class InFlight:
    """Tracks the in-flight model or tool activity of the step."""

    def __init__(self) -> None:
        self._task: asyncio.Task[Any] | None = None
        self._is_model = False
        self._interrupted = False

    def track(self, task: asyncio.Task[Any] | None, *, model: bool = False) -> None:
        """Remember the activity now running (None when it finished)."""
        self._task = task
        self._is_model = model and task is not None

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
