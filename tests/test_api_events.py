"""`GET /threads/{id}/events` on a real stack: Server-Sent Events that resume gapless and
end when the thread closes, a worker killed mid-stream, 200 subscribers on one poller, and
the long-poll JSON form."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import yaml
from api_support import SSE, SseClient, api_stack, sse
from support import add_script, agent_definitions, idle_after, start_thread, wait_until
from worker_process import WorkerProcess, worker_config

from weft.api import event_routes
from weft.contract.events import Event
from weft.store import Store

# About forty chunks 40 ms apart: the reply streams as a dozen or more delta events.
LONG_REPLY = {
    "text": "This reply streams in small pieces so a client can leave and come back. " * 2,
    "chunk_size": 4,
    "chunk_delay_ms": 40,
}


def _is(event_type: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("event") == event_type


def _as_stored(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(m["data"]) for m in messages]


def _stored(store: Store, thread_id: str) -> list[dict[str, Any]]:
    """The stored events as the API serves them: `Event.to_wire`, unset ids left out."""
    return [e.to_wire() for e in store.events.read(thread_id, limit=10_000)]


async def _no_waiters(feed: Any) -> None:
    for _ in range(500):
        if feed.waiting == 0:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{feed.waiting} waiters left behind")


async def test_stream_resumes_gapless_and_ends_when_the_thread_closes(
    start_worker, temporal_client, scripted_server, weft_config
):
    """A client leaves mid-reply and comes back with Last-Event-ID: over both connections
    it gets every stored event once, in order, then `end` when the thread is terminated."""
    script = add_script(scripted_server, {"replies": [LONG_REPLY]})
    worker = await start_worker(agent_definitions(script))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        handle = await start_thread(
            temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
        )
        async with sse(stack.http, handle.id) as first:
            assert first.response.headers["content-type"].startswith("text/event-stream")
            assert first.response.headers["cache-control"] == "no-cache"
            assert first.response.headers["x-accel-buffering"] == "no"
            await first.read_until(lambda m: m.get("event") == "model.delta")
            await first.read_until(lambda m: m.get("event") == "model.delta")
        assert first.messages[0] == {"retry": "1000"}
        await _no_waiters(stack.ctx.feed)  # the disconnect freed its waiter

        # Back while the reply still streams, from the last event it saw.
        resume_from = first.events()[-1]["id"]
        async with sse(stack.http, handle.id, **{"Last-Event-ID": resume_from}) as second:
            await second.read_until(_is("turn.completed"))
            await wait_until(handle, idle_after(1))
            await handle.signal("terminate", {})
            end = await second.read_until(_is("end"))
        await _no_waiters(stack.ctx.feed)

        received = first.events() + second.events()
        stored = _stored(stack.store, handle.id)
        assert [int(m["id"]) for m in received] == list(range(1, len(stored) + 1))
        assert _as_stored(received) == stored
        assert [m["event"] for m in received] == [e["type"] for e in stored]
        assert json.loads(end["data"]) == {"sequence": len(stored)}
        assert any(e["type"] == "snapshot.updated" for e in stored[-3:])

        # The closed thread's stream is still served: all of it, then `end` at once.
        async with sse(stack.http, handle.id, **{"Last-Event-ID": "0"}) as replay:
            await replay.read_until(_is("end"))
        assert _as_stored(replay.events()) == stored


async def test_worker_killed_mid_stream(dev_server, temporal_client, weft_config, tmp_path):
    """SIGKILL the worker subprocess while the model streams: the client's stream stays
    gapless, shows the retried attempt's `model.requested` with `reset: true`, and the
    turn completes on a fresh worker."""
    config_file = worker_config(tmp_path, dev_server.address)
    config = yaml.safe_load(config_file.read_text())
    first, second = WorkerProcess(config_file), WorkerProcess(config_file)
    await first.start()
    store = Store.open(config["store"]["url"])
    task_queue = config["temporal"]["taskQueue"]
    try:
        async with api_stack(temporal_client, weft_config, task_queue, store=store) as stack:
            handle = await start_thread(
                temporal_client,
                task_queue,
                agent="crash_agent",
                options={"heartbeatTimeoutSeconds": 2},
                messages=[{"role": "user", "content": "slow model please"}],
            )
            async with sse(stack.http, handle.id) as client:
                await client.read_until(_is("model.delta"))
                await first.kill()
                await second.start()
                await asyncio.wait_for(client.read_until(_is("turn.completed")), 90)
                await handle.signal("terminate", {})
                await asyncio.wait_for(client.read_until(_is("end")), 60)
            received = client.events()
            stored = _stored(store, handle.id)
            assert [int(m["id"]) for m in received] == list(range(1, len(stored) + 1))
            assert _as_stored(received) == stored
            requested = [e for e in _as_stored(received) if e["type"] == "model.requested"]
            assert [e["payload"]["reset"] for e in requested] == [False, True]
            completed = [e for e in _as_stored(received) if e["type"] == "model.completed"]
            assert len(completed) == 1
            # Deltas after the reset are the retried attempt's: the text a client shows.
            reset_at = requested[1]["sequence"]
            text = "".join(
                e["payload"]["text"]
                for e in _as_stored(received)
                if e["type"] == "model.delta" and e["sequence"] > reset_at
            )
            assert text.startswith("This reply streams slowly")
    finally:
        store.close()
        await first.stop()
        await second.stop()


async def test_two_hundred_subscribers_share_one_poller(
    start_worker, temporal_client, scripted_server, weft_config
):
    """200 SSE clients of one thread on SQLite all get the same new events; the feed polls
    once a tick for all of them, and they share the reads."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "unused"}]}))
    )
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        feed: Any = stack.ctx.feed
        handle = await start_thread(temporal_client, worker.task_queue)
        await wait_until(handle, lambda s: s.status == "waiting_input")
        cursor = stack.store.events.last_sequence(handle.id)
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        headers = {"Authorization": stack.http.headers["Authorization"]}
        async with httpx.AsyncClient(
            timeout=60, base_url=stack.url, headers=headers, limits=limits
        ) as http:
            async with _subscribers(http, handle.id, 200, cursor) as clients:
                for _ in range(200):
                    if feed.waiting == 200:
                        break
                    await asyncio.sleep(0.05)
                assert feed.waiting == 200
                polls, reads = feed.polls, feed.reads
                started = asyncio.get_running_loop().time()
                written = [_ping(handle.id) for _ in range(3)]
                for sequence, event in enumerate(written, cursor + 1):
                    # One at a time: every subscriber gets each before the next is written.
                    await asyncio.to_thread(stack.store.events.append, [event])
                    await asyncio.wait_for(
                        asyncio.gather(*(c.read_until(_has_id(sequence)) for c in clients)), 60
                    )
                elapsed = asyncio.get_running_loop().time() - started
                polled = feed.polls - polls
                read = feed.reads - reads
        await _no_waiters(feed)

    expected = [e.event_id for e in written]
    for client in clients:
        assert [json.loads(m["data"])["eventId"] for m in client.events()] == expected
    # One poller: at most one query a tick, however many subscribers (200 pollers would
    # have made about 200 times this many).
    assert polled <= elapsed / 0.05 + 2, (polled, elapsed)
    # Unshared, each subscriber would read twice an event (waiting again, then woken).
    assert read < 200 * len(written), read


def _has_id(sequence: int) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("id") == str(sequence)


def _ping(thread_id: str) -> Event:
    return Event(
        type="test.ping",
        event_id=f"evt-{uuid.uuid4().hex}",
        timestamp="2025-11-21T10:00:00.000Z",
        thread_id=thread_id,
    )


@asynccontextmanager
async def _subscribers(
    http: httpx.AsyncClient, thread_id: str, count: int, cursor: int
) -> AsyncIterator[list[SseClient]]:
    async with asyncio.TaskGroup() as group:
        opened = [group.create_task(_open(http, thread_id, cursor)) for _ in range(count)]
    clients = [task.result() for task in opened]
    try:
        yield clients
    finally:
        for client in clients:
            await client.response.aclose()


async def _open(http: httpx.AsyncClient, thread_id: str, cursor: int) -> SseClient:
    request = http.build_request(
        "GET",
        f"/threads/{thread_id}/events",
        headers={**SSE, "Last-Event-ID": str(cursor)},
        timeout=120,
    )
    response = await http.send(request, stream=True)
    assert response.status_code == 200
    client = SseClient(response)
    await client.read_until(lambda m: "retry" in m)
    return client


async def test_long_poll(start_worker, temporal_client, scripted_server, weft_config):
    """JSON: at once with events, `[]` after `wait`, early when an event arrives; `limit`;
    `closed` once the thread has closed and the cursor is at its end; 404 and 422."""
    script = add_script(scripted_server, {"replies": [{"text": "hello"}]})
    worker = await start_worker(agent_definitions(script))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        handle = await start_thread(
            temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
        )
        await wait_until(handle, idle_after(1))
        path = f"/threads/{handle.id}/events"
        stored = _stored(stack.store, handle.id)

        page = (await stack.http.get(path, params={"wait": 30})).json()
        assert page == {"events": stored, "cursor": len(stored), "closed": False}
        page = (await stack.http.get(path, params={"after": 1, "limit": 2})).json()
        assert [e["sequence"] for e in page["events"]] == [2, 3] and page["cursor"] == 3

        quiet = await stack.http.get(path, params={"after": len(stored), "wait": 0.3})
        assert quiet.json() == {"events": [], "cursor": len(stored), "closed": False}

        # Waiting up to a minute, it answers as soon as an event is written.
        started = asyncio.get_running_loop().time()
        poll = asyncio.create_task(
            stack.http.get(path, params={"after": len(stored), "wait": 60}, timeout=90)
        )
        for _ in range(500):
            if stack.ctx.feed.waiting:  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.01)
        ping = _ping(handle.id)
        await asyncio.to_thread(stack.store.events.append, [ping])
        page = (await poll).json()
        assert [e["eventId"] for e in page["events"]] == [ping.event_id]
        assert asyncio.get_running_loop().time() - started < 60  # before `wait` ran out
        cursor = page["cursor"]

        await handle.signal("terminate", {})
        await handle.result()
        page = (await stack.http.get(path, params={"after": cursor, "limit": 1})).json()
        assert page["closed"] is False and len(page["events"]) == 1  # more follow
        page = (await stack.http.get(path, params={"after": cursor, "wait": 60})).json()
        assert page["closed"] is True
        assert page["cursor"] == stack.store.events.last_sequence(handle.id)

        for params in ({}, {"wait": 1}):
            unknown = await stack.http.get("/threads/thread-nope/events", params=params)
            assert unknown.status_code == 404 and "thread-nope" in unknown.json()["error"]
        assert (await stack.http.get("/threads/thread-nope/events", headers=SSE)).status_code == 404
        for query, field in (
            ({"wait": 999}, "query.wait"),
            ({"after": -1}, "query.after"),
            ({"limit": 0}, "query.limit"),
            ({"wait": "nan"}, "query.wait"),
        ):
            invalid = await stack.http.get(path, params=query)
            assert invalid.status_code == 422 and invalid.json()["fields"] == [field], query
        invalid = await stack.http.get(path, headers={**SSE, "Last-Event-ID": "x"})
        assert invalid.status_code == 422 and invalid.json()["fields"] == ["header.Last-Event-ID"]

        spec = (await stack.http.get("/openapi.json")).json()
        ok = spec["paths"]["/threads/{thread_id}/events"]["get"]["responses"]["200"]
        assert set(ok["content"]) == {"application/json", "text/event-stream"}


async def test_stream_sends_heartbeats_in_silence(
    start_worker, temporal_client, scripted_server, weft_config, monkeypatch
):
    """A quiet thread's stream carries `: keep-alive` comments (every 15 s; shortened here)."""
    monkeypatch.setattr(event_routes, "HEARTBEAT_SECONDS", 0.2)
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "unused"}]}))
    )
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        handle = await start_thread(temporal_client, worker.task_queue)
        await wait_until(handle, lambda s: s.status == "waiting_input")
        async with sse(stack.http, handle.id) as client:
            await asyncio.wait_for(client.read_comments(2), 30)
        assert client.comments[:2] == [": keep-alive", ": keep-alive"]
