"""thread_read and session_snapshot: served live by query and from the store once closed."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from support import (
    SPECS,
    CityArgs,
    add_script,
    idle_after,
    read,
    start_thread,
    wait_until,
    weather,
)

from weft.client import resume
from weft.contract.thread import ThreadResult
from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)

SCRIPT = {
    "turns": [
        {
            "match": "plan",
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Where to?"}}]},
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}]},
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "Rome it is."},
            ],
        },
        {"match": "*", "replies": [{"text": "More?"}]},
    ]
}


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SPECS / name).read_text())
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


@pytest.fixture(scope="module")
def schemas() -> tuple[jsonschema.Draft202012Validator, jsonschema.Draft202012Validator]:
    """Validators for the event and the snapshot schemas."""
    return _validator("agentruntime-event.schema.json"), _validator(
        "agentruntime-snapshot.schema.json"
    )


def _definitions(script: str) -> Definitions:
    # No prices on the model: the cost is unknown and must be reported as such.
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="planner",
            toolDescription="plans",
            model="scripted",
            prompt="Plan a trip.",
            tools=["ask_human", "weather"],
            permissions={
                "rules": [{"tool": "weather", "args": {"city": "Oslo"}, "decision": "deny"}]
            },
        ),
        define_agent(
            name="helper",
            sideA={"prompt": "planner"},
            permissions={"mode": "default", "rules": [{"tool": "weather", "decision": "ask"}]},
        ),
        define_tool(name="weather", description="Weather", args=CityArgs, execute=weather),
    )


def _check(validator: jsonschema.Draft202012Validator, document: dict[str, Any]) -> None:
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
    assert not errors, f"{errors[0].message} at {list(errors[0].path)}"


async def test_read_models_and_events_validate(
    start_worker, temporal_client, scripted_server, schemas
):
    """Snapshots taken while waiting, idle and closed, and every event, fit the schemas."""
    event_schema, snapshot_schema = schemas
    worker = await start_worker(_definitions(add_script(scripted_server, SCRIPT)))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "plan a trip"}],
        sessionId="sess-1",
    )
    waiting = await wait_until(handle, lambda s: bool(s.pending_actions))
    live = await handle.query("session_snapshot")
    _check(snapshot_schema, live)
    (thread,) = live["threads"]
    assert (thread["status"], thread["nativeStatus"]) == ("blocked", "waiting_input")
    assert thread["pendingRequests"][0]["actionId"] == waiting.pending_actions[0]["actionId"]
    assert live["sessionId"] == "sess-1"
    await handle.signal(
        "respond_action",
        {
            "actionId": waiting.pending_actions[0]["actionId"],
            "decision": "answer",
            "answer": "Rome",
        },
    )
    permission = await wait_until(
        handle, lambda s: bool(s.pending_actions) and s.pending_actions[0]["kind"] != "ask_human"
    )
    assert permission.status == "waiting_permission"
    blocked = await handle.query("session_snapshot")
    _check(snapshot_schema, blocked)
    assert blocked["threads"][0]["permissionState"]["pendingApprovals"] == 1
    await handle.execute_update(
        "respond_action_checked",
        {"actionId": permission.pending_actions[0]["actionId"], "decision": "approve"},
    )
    idle = await wait_until(handle, idle_after(1))
    assert idle.unknown == ["usage.costUsd"] and idle.usage.cost_usd is None
    assert idle.stop_reason == "stop_on_response" and idle.last_outcome == "Rome it is."
    tools = [m.content for m in worker.store.messages.list(handle.id) if m.role == "tool"]
    assert "permission denied for weather by prompt rule 0" in tools[-1]
    await handle.signal("queue_message", {"role": "user", "content": "again"})
    await wait_until(handle, idle_after(2))

    window = await handle.query("session_snapshot", {"limit": 3})
    _check(snapshot_schema, window)
    history = window["threads"][0]["history"]
    assert [m["role"] for m in history["messages"]] == ["assistant", "user", "assistant"]
    older = await handle.query("session_snapshot", {"before": history["olderCursor"], "limit": 100})
    _check(snapshot_schema, older)
    assert older["threads"][0]["history"]["olderCursor"] is None
    total = history["totalMessages"]
    assert len(older["threads"][0]["history"]["messages"]) + 3 == total

    await handle.signal("terminate", {"reason": "done"})
    ThreadResult.model_validate(await handle.result())
    stored = resume.thread_read_from_store(worker.store, handle.id)
    assert stored is not None and stored.status == "cancelled"
    assert stored.counters == (await read(handle)).counters
    closed = await resume.snapshot(temporal_client, worker.store, handle.id, limit=2)
    assert closed is not None
    _check(snapshot_schema, closed)
    assert closed["threads"][0]["status"] == "cancelled"
    messages = closed["threads"][0]["history"]["messages"]
    assert [m["content"] for m in messages] == ["again", "More?"]
    assert closed["threads"][0]["history"]["olderCursor"] == messages[0]["position"]

    events = [e.to_wire() for e in worker.store.events.read(handle.id, limit=10_000)]
    for event in events:
        _check(event_schema, event)
    types = {e["type"] for e in events}
    for expected in (
        "action.required",
        "action.resolved",
        "permission.evaluated",
        "permission.requested",
        "permission.resolved",
        "snapshot.updated",
        "queue.changed",
    ):
        assert expected in types, f"no {expected} event"
    for event in events:
        # The close also stores the tool inventory and the execution environment
        # (tests/test_inventory_read_models.py); the thread read is the session's shell.
        if event["type"] == "snapshot.updated" and event["payload"]["kind"] == "thread_read":
            _check(snapshot_schema, _as_snapshot(event))


def _as_snapshot(event: dict[str, Any]) -> dict[str, Any]:
    from weft.contract.read_models import session_snapshot
    from weft.contract.thread import ThreadRead

    read_model = ThreadRead.model_validate(event["payload"]["threadRead"])
    return session_snapshot(read_model, [], older_cursor=None, total_messages=0)


async def test_reconnect_gets_the_snapshot_then_events_after_the_cursor(
    start_worker, temporal_client, scripted_server
):
    """A client resuming from sequence N gets a snapshot and then exactly the events after N."""
    script = add_script(scripted_server, {"replies": [{"text": "hello"}]})
    worker = await start_worker(_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    await wait_until(handle, idle_after(1))
    everything = worker.store.events.read(handle.id, limit=10_000)
    cursor = everything[len(everything) // 2].sequence
    resumed = await resume.reconnect(
        temporal_client, worker.store, handle.id, after=cursor, follow=False
    )
    assert resumed.snapshot is not None
    assert resumed.snapshot["threads"][0]["nativeStatus"] == "waiting_input"
    replayed = [e.sequence async for e in resumed.events]
    assert replayed == [e.sequence for e in everything if e.sequence > cursor]
    await handle.signal("terminate", {})
