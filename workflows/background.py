"""Workflow tasks that run beside the step cycle: child watchers, reports, deferred boots."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class BackgroundTasks:
    """Keeps references to workflow tasks (asyncio holds tasks weakly).

    Watchers are dropped at continue-as-new (reports arrive by signal anyway); other work
    (reports to a parent, deferred boots) must finish before the run ends.
    """

    def __init__(self) -> None:
        self._watchers: list[asyncio.Task[Any]] = []
        self._work: list[asyncio.Task[Any]] = []

    def watch(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run a watcher the run may end without."""
        _keep(self._watchers, asyncio.create_task(coroutine))

    def run(self, coroutine: Coroutine[Any, Any, None]) -> None:
        """Run work the run must wait for before it ends."""
        _keep(self._work, asyncio.create_task(coroutine))

    def busy(self) -> bool:
        """Whether work is still in flight (not a safe point to continue as new)."""
        return any(not t.done() for t in self._work)

    async def finish(self) -> None:
        """Wait for the work still in flight, including work it starts."""
        while self._work:
            pending, self._work = self._work, []
            await asyncio.gather(*pending, return_exceptions=True)


def _keep(tasks: list[asyncio.Task[Any]], task: asyncio.Task[Any]) -> None:
    tasks[:] = [t for t in tasks if not t.done()]
    tasks.append(task)
