"""MCP tool catalogues by id: written once by `tool.catalog`, cached per worker.

A catalogue is content-addressed (`catalog_id` hashes everything in it but the time it
was listed) and never changes, so it is kept in the store's snapshots table, the
immutable JSON-by-content-id table the definition snapshots use: a second write of the
same id is a no-op, a read is by id, and nothing else needs a table of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from temporalio.exceptions import ApplicationError

from weft.contract.mcp import McpServerCatalog
from weft.store.protocols import HasSnapshots


class CatalogStore:
    """Stores catalogues and loads them by id; immutable, so caching them is safe."""

    def __init__(self, store: HasSnapshots, *, max_entries: int = 1024) -> None:
        self._store = store
        self._cache: dict[str, McpServerCatalog] = {}
        self._max = max_entries

    def put(self, catalog: McpServerCatalog) -> None:
        """Store `catalog` under its id (blocking; storing it again changes nothing)."""
        self._store.snapshots.put(catalog.catalog_id, catalog.model_dump(mode="json"))
        self._remember(catalog)

    def load(self, catalog_id: str) -> McpServerCatalog | None:
        """The catalogue stored under `catalog_id`, or None (blocking on a cache miss)."""
        found = self._cache.get(catalog_id)
        if found is not None:
            return found
        data = self._store.snapshots.get(catalog_id)
        if data is None:
            return None
        catalog = McpServerCatalog.model_validate(data)
        self._remember(catalog)
        return catalog

    async def get_many(self, ids: Mapping[str, str]) -> dict[str, McpServerCatalog]:
        """The catalogue of each server in `ids` (server → catalog id); a missing one is a
        non-retryable error, as a missing snapshot is: the store lost what it wrote."""
        if all(i in self._cache for i in ids.values()):
            return {server: self._cache[i] for server, i in ids.items()}
        return await asyncio.to_thread(self._get_many, ids)

    def _get_many(self, ids: Mapping[str, str]) -> dict[str, McpServerCatalog]:
        catalogs: dict[str, McpServerCatalog] = {}
        for server, catalog_id in ids.items():
            catalog = self.load(catalog_id)
            if catalog is None:
                raise ApplicationError(
                    f"the tool catalogue {catalog_id} of MCP server {server!r} is not in the store",
                    type="McpCatalogMissing",
                    non_retryable=True,
                )
            catalogs[server] = catalog
        return catalogs

    def _remember(self, catalog: McpServerCatalog) -> None:
        if catalog.catalog_id in self._cache:
            return
        if len(self._cache) >= self._max:
            self._cache.pop(next(iter(self._cache)))
        self._cache[catalog.catalog_id] = catalog
