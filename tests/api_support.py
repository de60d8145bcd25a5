"""The HTTP API on a real stack: the session's dev server, a weft worker on the scripted
model, a store, and `create_api` served by uvicorn on a loopback port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from opentelemetry.trace import Tracer
from temporalio.client import Client

from weft.api import create_api
from weft.api.context import ApiContext
from weft.api.event_feed import open_event_feed
from weft.api.gateway import GatewayServer
from weft.client.threads import Threads
from weft.store import Store
from weft.workers.config import WeftConfig

API_TOKEN = "test-api-token"
SSE = {"Accept": "text/event-stream"}


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
    tracer: Tracer | None = None,
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
    app = create_api(ctx, API_TOKEN, cors_origin=cors_origin, tracer=tracer)
    try:
        async with GatewayServer(app, port=0) as server:
            headers = {"Authorization": f"Bearer {API_TOKEN}"}
            async with httpx.AsyncClient(timeout=60, base_url=server.url, headers=headers) as http:
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


class SseClient:
    """One open stream: its messages as parsed by `sse_events`, and its comment lines."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.messages: list[dict[str, Any]] = []
        self.comments: list[str] = []
        self._lines = response.aiter_lines()

    async def read_until(self, done: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Read messages until one satisfies `done`; returns it."""
        async for parsed in self._blocks():
            for message in parsed:
                if done(message):
                    return message
        raise AssertionError(f"the stream ended before the awaited message: {self.messages}")

    async def read_comments(self, count: int) -> None:
        """Read until `count` comment lines have come."""
        async for _ in self._blocks():
            if len(self.comments) >= count:
                return
        raise AssertionError(f"the stream ended after comments {self.comments}")

    async def _blocks(self) -> AsyncIterator[list[dict[str, Any]]]:
        block: list[str] = []
        async for line in self._lines:
            if line:
                block.append(line)
                continue
            self.comments += [c for c in block if c.startswith(":")]
            parsed = sse_events("\n".join(block))
            block = []
            self.messages += parsed
            yield parsed

    def events(self) -> list[dict[str, Any]]:
        """The thread's events received (not `retry` or `end`)."""
        return [m for m in self.messages if "id" in m and m.get("event") != "end"]


@asynccontextmanager
async def sse(http: httpx.AsyncClient, thread_id: str, **headers: str) -> AsyncIterator[SseClient]:
    """An open event stream of `thread_id`; leaving the block disconnects."""
    request = http.stream(
        "GET", f"/threads/{thread_id}/events", headers={**SSE, **headers}, timeout=120
    )
    async with request as response:
        assert response.status_code == 200, await response.aread()
        yield SseClient(response)


async def read_until(
    stack: ApiStack, thread_id: str, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """GET /threads/{id} until `predicate` holds (20 s at most); the last read model."""
    for _ in range(400):
        read: dict[str, Any] = (await stack.http.get(f"/threads/{thread_id}")).json()
        if predicate(read):
            return read
        await asyncio.sleep(0.05)
    raise AssertionError(f"condition not met; last read: {read}")


def idle(turns: int) -> Callable[[dict[str, Any]], bool]:
    """A predicate on the read model: waiting for input, queue empty, `turns` turns run."""
    return lambda r: (
        r["status"] == "waiting_input" and not r["queue"] and r["counters"]["turns"] >= turns
    )


async def send_elicitation(
    stack: ApiStack,
    thread_id: str,
    turn_id: str,
    *,
    message: str,
    schema: dict[str, Any],
    **fields: Any,
) -> str:
    """Send `mcp_elicitation` as a `tool.call` activity whose MCP server asks a person would,
    and wait until the thread lists the action; its id."""
    import uuid

    from weft.contract.mcp import SIGNAL_MCP_ELICITATION, McpElicitation

    request = McpElicitation(
        action_id=f"act_{uuid.uuid4().hex[:12]}",
        tool_call_id=f"call_{uuid.uuid4().hex[:8]}",
        tool_name="book_trip",
        turn_id=turn_id,
        step_id="step_test",
        server="travel",
        message=message,
        requested_schema=schema,
        **fields,
    )
    await stack.ctx.client.get_workflow_handle(thread_id).signal(SIGNAL_MCP_ELICITATION, request)
    await read_until(
        stack,
        thread_id,
        lambda r: request.action_id in {a["actionId"] for a in r["pendingActions"]},
    )
    return request.action_id


async def get_until(
    http: httpx.AsyncClient, path: str, holds: Callable[[Any], bool], *, timeout: float = 30
) -> Any:
    """GET `path` (200 each time) until its JSON `holds` (bounded): for what a listing shows
    a moment late, such as a run closed through Temporal that a visibility query finds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        page = await http.get(path)
        assert page.status_code == 200, page.text
        found = page.json()
        if holds(found):
            return found
        assert asyncio.get_running_loop().time() < deadline, found
        await asyncio.sleep(0.1)
