"""ThreadState's key-value store (Runtime §14): one JSON value per key, per thread."""

from __future__ import annotations

from typing import Any

from weft.activities.thread_scope import ThreadScope


class ThreadKv:
    """`get_value` / `set_value` of ThreadState, over the store's values."""

    def __init__(self, scope: ThreadScope) -> None:
        self._scope = scope

    async def get_value(self, key: str) -> Any | None:
        """The value stored under `key` for this thread, or None."""
        return await self._scope.read(self._scope.store.values.get, self._scope.thread_id, key)

    async def set_value(self, key: str, value: Any) -> None:
        """Store `value` durably under `key`; None deletes it."""
        # After the call's start events, like every write: the value's history row is
        # tagged with the thread's last event, and a fork must not see it before them.
        scope = self._scope
        await scope.write(scope.store.values.set, scope.thread_id, key, value)
