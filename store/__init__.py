"""The persistent store: messages, events, key-value data, snapshots, threads and files.

Build one in a worker with `Store.open(url)` and inject it into class-based activities,
which call its aggregates' synchronous methods (`store.messages.list(...)`,
`store.events.record(...)`, …) through `asyncio.to_thread`.
"""

from weft.store.kv import (
    MAX_KEY_CHARS,
    MAX_KEYS_PER_THREAD,
    MAX_VALUE_BYTES,
    StoreLimitError,
)
from weft.store.rows import ThreadRow
from weft.store.store import Store

__all__ = [
    "MAX_KEYS_PER_THREAD",
    "MAX_KEY_CHARS",
    "MAX_VALUE_BYTES",
    "Store",
    "StoreLimitError",
    "ThreadRow",
]
