"""The `tool.catalog` activity: list MCP servers' tools once and record what was found.

The workflow runs it when a prompt that uses MCP servers becomes active (and on a refresh)
and keeps the catalogues it returns, so a replay never lists again. A server that cannot
be listed is data (a `failed` catalogue and a `runtime.warning`), never an activity
failure: a prompt runs without that server's tools and its model is told.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from weft.activities.clock import now_iso
from weft.activities.mcp.catalog import failed_catalog, ready_catalog, reserved_names
from weft.activities.mcp.catalog_store import CatalogStore
from weft.activities.mcp.pool import McpSessionPool
from weft.activities.mcp.types import McpUnavailable
from weft.activities.snapshots import SnapshotCache
from weft.activities.spans import without_secrets
from weft.activities.streaming import Heartbeater
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.mcp import (
    ACTIVITY_TOOL_CATALOG,
    McpServerCatalog,
    ToolCatalogInput,
    ToolCatalogResult,
)
from weft.contract.thread_env import EnvEntry, prompt_env
from weft.store import Store

RESOLVED_EVENT = "tool.catalog.resolved"
# The pool bounds a listing by the server's startup timeout; this only backs it up.
_LIST_GRACE_SECONDS = 10.0


class CatalogActivities:
    """Lists MCP servers through the worker's session pool and stores their catalogues."""

    def __init__(
        self,
        store: Store,
        snapshots: SnapshotCache,
        pool: McpSessionPool,
        *,
        catalogs: CatalogStore | None = None,
    ) -> None:
        self._store = store
        self._snapshots = snapshots
        self._pool = pool
        self._catalogs = catalogs or CatalogStore(store)

    @activity.defn(name=ACTIVITY_TOOL_CATALOG)
    async def resolve_catalog(self, job: ToolCatalogInput) -> ToolCatalogResult:
        """List `job.servers` with the thread's env; store each catalogue and, in one
        commit, `tool.catalog.resolved` (id `job.event_id`) with a warning per problem."""
        # A retry after the commit returns what was recorded: workflow and record agree.
        recorded = await asyncio.to_thread(self._recorded, job)
        if recorded is not None:
            return recorded
        snapshot = await self._snapshots.get(job.snapshot_id)
        env = await asyncio.to_thread(self._env, job, snapshot)
        reserved = reserved_names(snapshot)
        async with Heartbeater():
            found = await asyncio.gather(
                *(self._list(snapshot, name, env, reserved) for name in dict.fromkeys(job.servers))
            )
        servers = {catalog.server: catalog for catalog in found}
        await asyncio.to_thread(self._record, job, servers)
        return ToolCatalogResult(servers=servers)

    async def _list(
        self,
        snapshot: DefinitionSnapshot,
        name: str,
        env: dict[str, EnvEntry],
        reserved: set[str],
    ) -> McpServerCatalog:
        server = snapshot.mcp_servers.get(name)
        if server is None:
            return failed_catalog(
                name,
                f"MCP server {name!r} is not defined in this thread's definitions",
                resolved_at=now_iso(),
            )
        try:
            async with asyncio.timeout(server.startup_timeout_seconds + _LIST_GRACE_SECONDS):
                listed = await self._pool.list_tools(server, env)
        except McpUnavailable as err:
            return failed_catalog(name, without_secrets(str(err), env), resolved_at=now_iso())
        except TimeoutError:
            error = (
                f"MCP server {name!r}: did not list its tools within "
                f"{server.startup_timeout_seconds:g} s"
            )
            return failed_catalog(name, error, resolved_at=now_iso())
        except Exception as err:  # whatever breaks, a server never fails the thread's step
            error = f"MCP server {name!r}: listing failed: {type(err).__name__}: {err}"
            return failed_catalog(name, without_secrets(error, env), resolved_at=now_iso())
        return ready_catalog(server, listed, reserved=reserved, resolved_at=now_iso())

    def _env(self, job: ToolCatalogInput, snapshot: DefinitionSnapshot) -> dict[str, EnvEntry]:
        """The env the prompt's tools get (tool_state.thread_state_for): secrets included."""
        row = self._store.threads.get(job.thread_id)
        agent = snapshot.agent_def(job.agent)
        prompt = snapshot.prompts[job.prompt or agent.side(job.side).prompt]
        return prompt_env(prompt, agent, row.env if row else None)

    def _record(self, job: ToolCatalogInput, servers: dict[str, McpServerCatalog]) -> None:
        # Catalogues first: the event never names one the store lacks.
        for catalog in servers.values():
            self._catalogs.put(catalog)
        resolved = _event(
            job, job.event_id, RESOLVED_EVENT, {"reason": job.reason, "servers": _summary(servers)}
        )
        self._store.events.record([], [resolved, *_warnings(job, servers)])

    def _recorded(self, job: ToolCatalogInput) -> ToolCatalogResult | None:
        """What an earlier attempt recorded under `job.event_id`, when it did."""
        sequence = self._store.events.sequence_of(job.thread_id, job.event_id)
        if sequence is None:
            return None
        found = self._store.events.read(
            job.thread_id, after=sequence - 1, limit=1, types=[RESOLVED_EVENT]
        )
        if not found or found[0].event_id != job.event_id:
            return None
        servers: dict[str, McpServerCatalog] = {}
        for name, entry in found[0].payload["servers"].items():
            catalog = self._catalogs.load(entry["catalogId"])
            if catalog is None:
                return None
            servers[name] = catalog
        return ToolCatalogResult(servers=servers)


def _summary(servers: dict[str, McpServerCatalog]) -> dict[str, dict[str, Any]]:
    """The event's view of each catalogue: ids, the model's tool names, what went wrong."""
    summary: dict[str, dict[str, Any]] = {}
    for name, catalog in servers.items():
        entry: dict[str, Any] = {
            "status": catalog.status,
            "catalogId": catalog.catalog_id,
            "digest": catalog.digest,
            "tools": [t.name for t in catalog.tools],
        }
        if catalog.error is not None:
            entry["error"] = catalog.error
        if catalog.warnings:
            entry["warnings"] = catalog.warnings
        summary[name] = entry
    return summary


def _warnings(job: ToolCatalogInput, servers: dict[str, McpServerCatalog]) -> list[Event]:
    """A `runtime.warning` per server that failed and per tool skipped."""
    events: list[Event] = []
    for name, catalog in servers.items():
        if catalog.status == "failed":
            payload = {
                "code": "mcp_server_unavailable",
                "message": catalog.error or f"MCP server {name!r} is unavailable",
                "server": name,
            }
            events.append(_event(job, f"{job.event_id}:{name}:failed", "runtime.warning", payload))
        for n, warning in enumerate(catalog.warnings, start=1):
            payload = {"code": "mcp_tool_skipped", "message": warning, "server": name}
            events.append(_event(job, f"{job.event_id}:{name}:skip{n}", "runtime.warning", payload))
    return events


def _event(job: ToolCatalogInput, event_id: str, kind: str, payload: dict[str, Any]) -> Event:
    return Event(
        type=kind,
        event_id=event_id,
        timestamp=now_iso(),
        thread_id=job.thread_id,
        session_id=job.session_id,
        turn_id=job.turn_id,
        step_id=job.step_id,
        payload=payload,
    )
