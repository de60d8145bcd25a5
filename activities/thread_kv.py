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
        # A value is no event, so it does not make the call store its start events first
        # (that would be one more transaction for every tool that sets a value). Its
        # history row may then be tagged with an event before the call's `tool.started`:
        # a point inside the turn, where no fork may be taken (client/fork_points.py), so
        # every state a fork can see is the same either way.
        scope = self._scope
        await scope.write_unordered(scope.store.values.set, scope.thread_id, key, value)
