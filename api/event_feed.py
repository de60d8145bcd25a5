"""New events of threads for the API's streams and long polls: the store's event feed
(store/event_signal.py), one per `weft serve` process (docs/event-stream.md).

PostgreSQL pushes (LISTEN/NOTIFY); SQLite is watched through `PRAGMA data_version`, with the
events query only when the file changed; on both a slow safety-net query catches whatever a
lost notification missed. A wake-up is a hint: a woken waiter reads its events from the
store, so a lost or extra hint costs latency or a read, never an event.
"""

from __future__ import annotations

from weft.api.context import EventFeed
from weft.store import Store
from weft.store.event_signal import (
    CHECK_INTERVAL,
    POLL_INTERVAL,
    READ_LIMIT,
    ListeningFeed,
    PollingFeed,
    Waiters,
)
from weft.store.event_signal import open_event_feed as _open_feed


async def open_event_feed(
    store: Store,
    *,
    poll_interval: float = POLL_INTERVAL,
    check_interval: float = CHECK_INTERVAL,
) -> EventFeed:
    """The feed for `store`: pushed on PostgreSQL, a change signal checked every
    `check_interval` seconds on SQLite; on both a safety-net query every `poll_interval`
    seconds while someone waits."""
    return await _open_feed(store, poll_interval=poll_interval, check_interval=check_interval)


__all__ = ["READ_LIMIT", "ListeningFeed", "PollingFeed", "Waiters", "open_event_feed"]
