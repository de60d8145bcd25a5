"""The HTTP API on a real stack: the session's dev server, a weft worker on the scripted
model, a store, and `create_api` served by uvicorn on a loopback port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from temporalio.client import Client

from weft.activities.store import Store
from weft.api import create_api
from weft.api.context import ApiContext
from weft.api.event_feed import open_event_feed
from weft.client.threads import Threads
from weft.workers.config import WeftConfig
from weft.workers.gateway import GatewayServer

API_TOKEN = "test-api-token"


@dataclass
class ApiStack:
    url: str
    http: httpx.AsyncClient  # sends the token
    store: Store
    task_queue: str
    ctx: ApiContext


@asynccontextmanager
async def api_stack(
    temporal_client: Client,
    weft_config: WeftConfig,
    task_queue: str,
    *,
    cors_origin: str | None = None,
    store: Store | None = None,
) -> AsyncIterator[ApiStack]:
    """Serve the API over `weft_config`'s store for threads on `task_queue` (a worker for
    that queue is the caller's: `start_worker(defs, task_queue=...)`)."""
    own_store = store is None
    store = store or Store.open(weft_config.store_url())
    feed = await open_event_feed(store)
    ctx = ApiContext(
        store=store,
        client=temporal_client,
        threads=Threads(temporal_client, task_queue=task_queue, store=store),
        feed=feed,
        task_queue=task_queue,
    )
    app = create_api(ctx, API_TOKEN, cors_origin=cors_origin)
    try:
        async with GatewayServer(app, port=0) as server:
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with httpx.AsyncClient(base_url=server.url, headers=headers) as http:
                yield ApiStack(server.url, http, store, task_queue, ctx)
    finally:
        await feed.close()
        if own_store:
            store.close()


def sse_events(text: str) -> list[dict[str, Any]]:
    """Parse a Server-Sent Events body into its events: {"id", "event", "data"} each."""
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in text.splitlines():
        if not line:
            if current:
                events.append(current)
            current = {}
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "data":
            current["data"] = current["data"] + "\n" + value if "data" in current else value
        elif field in ("id", "event", "retry"):
            current[field] = value
    if current:
        events.append(current)
    return events
