"""The definitions this worker serves, and the check of a thread's version against them.

A `latest` thread asks at a session's first turn whether its worker serves a newer version
of its agent: the `definitions.refresh` local activity asks on its own, and the session's
first `model.call` asks first thing, before it writes or sends anything (docs/deploys.md).
Both answer from here, so they give the same answer and store the same rows.
"""

from __future__ import annotations

import asyncio

from weft.activities.snapshots import SnapshotCache
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.definitions_version import (
    DefinitionsRefreshInput,
    DefinitionsRefreshResult,
    changed_definitions,
    snapshot_content,
    snapshot_digest,
)
from weft.definitions import DefinitionError, Definitions
from weft.store import Store


class ServedDefinitions:
    """This worker's version of each agent: its definitions never change while it runs."""

    def __init__(self, store: Store, definitions: Definitions, snapshots: SnapshotCache) -> None:
        self._store = store
        self._definitions = definitions
        self._snapshots = snapshots
        self._served: dict[str, tuple[DefinitionSnapshot, str]] = {}

    def version_of(self, agent: str) -> tuple[DefinitionSnapshot, str]:
        """The snapshot of `agent` this worker serves and its digest (DefinitionError when
        it does not define the agent)."""
        if agent not in self._served:
            snapshot = self._definitions.snapshot(agent)
            self._served[agent] = (snapshot, snapshot_digest(snapshot))
        return self._served[agent]

    async def check(self, thread: DefinitionsRefreshInput) -> DefinitionsRefreshResult:
        """This worker's version of the thread's agent when it differs from the thread's,
        stored first (so any worker can run the thread's turns with it), with what changed;
        an empty result when the thread already runs it."""
        try:
            snapshot, digest = self.version_of(thread.agent)
        except DefinitionError as err:
            return DefinitionsRefreshResult(refused=f"this worker cannot serve the agent: {err}")
        if digest == thread.digest:
            return DefinitionsRefreshResult()
        current = await self._snapshots.get(thread.snapshot_id)
        await asyncio.to_thread(self.record, snapshot, digest)
        self._snapshots.remember(snapshot)
        changes = changed_definitions(snapshot_content(current), snapshot_content(snapshot))
        return DefinitionsRefreshResult(snapshot=snapshot, digest=digest, changes=changes)

    def record(self, snapshot: DefinitionSnapshot, digest: str) -> None:
        """The snapshot and the version row naming it, in one transaction."""
        self._store.snapshots.put(
            snapshot.snapshot_id,
            snapshot.model_dump(mode="json", by_alias=True),
            version=(digest, snapshot.agent.name),
        )
