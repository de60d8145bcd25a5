"""(being written) New events of threads for the API's streams.

Placeholder so other parts can run: each waiter polls the store itself. To be replaced by
one poller per process (SQLite) and LISTEN/NOTIFY (PostgreSQL).
"""

from __future__ import annotations

import asyncio

from weft.activities.store import Store
from weft.api.context import EventFeed
from weft.contract.events import Event


class _NaiveFeed:
    def __init__(self, store: Store, poll_interval: float) -> None:
        self._store = store
        self._poll_interval = poll_interval

    async def wait_for_events(self, thread_id: str, after: int, timeout: float) -> list[Event]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            batch = await asyncio.to_thread(self._store.events.read, thread_id, after=after)
            if batch or loop.time() >= deadline:
                return batch
            await asyncio.sleep(self._poll_interval)

    async def close(self) -> None:
        return None


async def open_event_feed(store: Store, *, poll_interval: float = 0.05) -> EventFeed:
    """The feed for `store`: push on PostgreSQL, one shared poller on SQLite."""
    return _NaiveFeed(store, poll_interval)


__all__ = ["open_event_feed"]
