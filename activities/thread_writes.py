"""How ThreadState's parts write for their thread: after what the running call owes.

`tool.call` keeps its start events (`tool.started`, the workflow's outbox) for its final
write when the tool ends quickly (activities/pending_events.py). A tool that writes an
event of its own meanwhile (`emit`, `update_message`, `set_env`, a file) must not be
stored ahead of them, so every such write first lets the call store what it still owes.
A key-value write does not wait (activities/thread_kv.py says why).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

OwedWrite = Callable[[], Awaitable[object]]


class ThreadWrites:
    """The write path of one ThreadState (and of the tools it invokes): `write`."""

    def __init__(self, before_write: OwedWrite | None = None) -> None:
        # Set by the activity that built the state: stores the events its call still owes.
        self.before_write = before_write

    async def write(self, write: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run the blocking store write `write` off the event loop, after what is owed."""
        if self.before_write is not None:
            await self.before_write()
        return await asyncio.to_thread(write, *args, **kwargs)
