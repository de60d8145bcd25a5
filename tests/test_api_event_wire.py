"""Events served over HTTP are the schema's events: every event of a real thread (a model
call, a tool call, a permission action, a terminate), fetched by long poll and by SSE,
validates against the vendored agentruntime-event.schema.json; and the end of a closed
thread's stream never names a sequence that does not exist."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from api_support import SSE, SseClient, api_stack, idle, read_until, sse
from support import add_script, agent_definitions, event_schema_validator

ASK_WEATHER = {
    "replies": [
        {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
        {"text": "Sunny in Oslo.", "chunk_size": 4},
    ]
}
PERMISSION_ASK = {"mode": "auto", "rules": [{"tool": "weather", "decision": "ask"}]}


@pytest.fixture(scope="module")
def event_validator() -> jsonschema.Draft202012Validator:
    """A validator for agentruntime-event.schema.json, checking formats too."""
    return event_schema_validator()


def _invalid(validator: jsonschema.Draft202012Validator, events: list[dict[str, Any]]) -> list[str]:
    """One line per event the schema refuses: its type and the first reason."""
    found = []
    for event in events:
        errors = sorted(validator.iter_errors(event), key=lambda e: list(e.path))
        if errors:
            found.append(f"{event.get('type')} #{event.get('sequence')}: {errors[0].message}")
    return found


async def _closed_thread(stack: Any) -> str:
    """A thread that called the model, asked permission for a tool (approved over HTTP), ran
    it, answered, and was terminated: its id, once it has closed."""
    started = await stack.http.post("/threads", json={"agent": "helper", "messages": ["go"]})
    assert started.status_code == 201, started.text
    thread_id: str = started.json()["threadId"]
    read = await read_until(stack, thread_id, lambda r: bool(r["pendingActions"]))
    action_id = read["pendingActions"][0]["actionId"]
    approved = await stack.http.post(
        f"/threads/{thread_id}/actions/{action_id}", json={"decision": "approve"}
    )
    assert approved.status_code == 200, approved.text
    await read_until(stack, thread_id, idle(1))
    await stack.ctx.threads.terminate(thread_id)
    await stack.ctx.threads.result(thread_id)
    return thread_id


async def test_events_over_long_poll_and_sse_validate_against_the_schema(
    start_worker, temporal_client, weft_config, scripted_server, event_validator
):
    """Every event of a thread with a tool call, a permission and a model call, as the long
    poll and the stream send it, is valid: unset ids are left out, never `null`."""
    script = add_script(scripted_server, ASK_WEATHER)
    worker = await start_worker(agent_definitions(script, permissions=PERMISSION_ASK))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        thread_id = await _closed_thread(stack)
        path = f"/threads/{thread_id}/events"
        polled: list[dict[str, Any]] = []
        closed = False
        while not closed:
            page = await stack.http.get(path, params={"after": len(polled), "limit": 500})
            assert page.status_code == 200, page.text
            polled += page.json()["events"]
            closed = page.json()["closed"]
        async with sse(stack.http, thread_id) as client:
            await client.read_until(lambda m: m.get("event") == "end")
        streamed = [json.loads(m["data"]) for m in client.events()]

        assert _invalid(event_validator, polled) == []
        assert _invalid(event_validator, streamed) == []
        stored = stack.store.events.read(thread_id, limit=10_000)
        assert polled == streamed == [e.to_wire() for e in stored]
        types = {e["type"] for e in polled}
        assert {"model.requested", "action.required", "tool.started"} <= types, types
        # The ids the events do carry are there, and none is sent as null.
        assert any("actionId" in e for e in polled) and any("toolCallId" in e for e in polled)
        assert any("modelRequestId" in e for e in polled)
        assert not [(e["type"], k) for e in polled for k, v in e.items() if v is None]


async def test_a_cursor_past_the_end_of_a_closed_thread_gets_its_real_last_event(
    start_worker, temporal_client, weft_config, scripted_server
):
    """SSE and long poll with `after` beyond a closed thread's last event end at that last
    event (`end` id and `cursor`), never at the sequence the client made up."""
    script = add_script(scripted_server, ASK_WEATHER)
    worker = await start_worker(agent_definitions(script, permissions=PERMISSION_ASK))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        thread_id = await _closed_thread(stack)
        last = stack.store.events.last_sequence(thread_id)
        assert last > 0
        path = f"/threads/{thread_id}/events"

        beyond = stack.http.stream("GET", path, params={"after": 100000}, headers=SSE, timeout=60)
        async with beyond as response:
            assert response.status_code == 200
            client = SseClient(response)
            end = await client.read_until(lambda m: m.get("event") == "end")
        assert end["id"] == str(last) and json.loads(end["data"]) == {"sequence": last}
        assert client.events() == []
        async with sse(stack.http, thread_id, **{"Last-Event-ID": "100000"}) as resumed:
            end = await resumed.read_until(lambda m: m.get("event") == "end")
        assert end["id"] == str(last)

        reply = await stack.http.get(path, params={"after": 100000})
        assert reply.json() == {"events": [], "cursor": last, "closed": True}

        # A client at the very end gets the same `end`, at once.
        async with sse(stack.http, thread_id, **{"Last-Event-ID": str(last)}) as at_end:
            again = await at_end.read_until(lambda m: m.get("event") == "end")
        assert again["id"] == str(last) and at_end.events() == []
