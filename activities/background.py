"""Background tasks of an activity: stopping one without swallowing a cancellation."""

from __future__ import annotations

import asyncio
from typing import Any


async def stop(task: asyncio.Task[Any] | None) -> None:
    """Cancel `task` and wait until it has ended.

    `asyncio.wait` does not re-raise the task's own CancelledError, so a cancellation of
    the caller while it waits still reaches the caller (a bare `except CancelledError:
    pass` around `await task` would swallow it).
    """
    if task is None or task.done():
        return
    task.cancel()
    await asyncio.wait([task])
