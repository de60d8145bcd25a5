"""Definition snapshots by id: written once when a thread starts, cached per worker."""

from __future__ import annotations

import asyncio

from temporalio.exceptions import ApplicationError

from weft.contract.definitions import DefinitionSnapshot
from weft.store.protocols import HasSnapshots


class SnapshotCache:
    """Loads snapshots from the store; they are immutable, so caching them is safe."""

    def __init__(self, store: HasSnapshots, *, max_entries: int = 1024) -> None:
        self._store = store
        self._cache: dict[str, DefinitionSnapshot] = {}
        self._max = max_entries

    def remember(self, snapshot: DefinitionSnapshot) -> None:
        """Keep a snapshot this worker just wrote."""
        if len(self._cache) >= self._max:
            self._cache.pop(next(iter(self._cache)))
        self._cache[snapshot.snapshot_id] = snapshot

    async def get(self, snapshot_id: str) -> DefinitionSnapshot:
        """The snapshot, from memory or the store; missing is a non-retryable error."""
        found = self._cache.get(snapshot_id)
        if found is not None:
            return found
        data = await asyncio.to_thread(self._store.snapshots.get, snapshot_id)
        if data is None:
            raise ApplicationError(
                f"definition snapshot {snapshot_id} is not in the store",
                type="SnapshotMissing",
                non_retryable=True,
            )
        snapshot = DefinitionSnapshot.model_validate(data)
        self.remember(snapshot)
        return snapshot
