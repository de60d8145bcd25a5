"""The subagent registry (Runtime §7.1): events, store rows, continue-as-new, ThreadState lookups."""

from __future__ import annotations

from subagent_support import (
    NoArgs,
    delegate_then_acknowledge,
    family,
    look_around,
    start_boss,
    tool_result,
)
from support import add_script, event_schema_validator, idle_after, start_thread, wait_until

from weft.definitions import define_tool


async def test_subagent_events_validate_against_the_schema(
    start_worker, temporal_client, scripted_server
):
    """subagent.* events carry parent and child ids and validate (seed 001 schema)."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "q"}}]},
                {"text": "done"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "progress", "arguments": {"note": "busy"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "fine"}}]},
            ]
        },
    )
    worker = await start_worker(family(parent, child))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    reference = state.children[0]["reference"]
    child_handle = temporal_client.get_workflow_handle(reference)
    await child_handle.result()
    await wait_until(handle, lambda s: s.children[0]["closed"])
    await handle.signal("terminate", {})
    await handle.result()
    validator = event_schema_validator()
    events = worker.store.events.read(handle.id, limit=10_000)
    events += worker.store.events.read(reference, limit=10_000)
    for event in events:
        errors = [
            e.message
            for e in validator.iter_errors(
                event.model_dump(mode="json", by_alias=True, exclude_none=True)
            )
        ]
        assert not errors, (event.type, errors)
    kinds = [e.type for e in events if e.type.startswith("subagent.")]
    assert {"subagent.spawned", "subagent.status", "subagent.completed", "subagent.closed"} <= set(
        kinds
    )
    for event in events:
        if event.type.startswith("subagent."):
            assert event.payload["parentThreadId"] == handle.id
            assert event.payload["childThreadId"] == reference
    # The registry row in the store follows the events.
    [row] = worker.store.subagents.list(handle.id)
    assert row["reference"] == reference and row["status"] == "completed" and row["closed"]


async def test_children_registry_survives_continue_as_new(
    start_worker, temporal_client, scripted_server
):
    """A child's result reaches the parent's next run; the registry was carried over."""
    parent = delegate_then_acknowledge(scripted_server, "slow", "received")
    child = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "delay_ms": 1500,
                    "tool_calls": [{"name": "report", "arguments": {"summary": "late"}}],
                }
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"blocking": False}))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="boss",
        messages=[{"role": "user", "content": "go"}],
        options={"continueAsNewEvents": 20},
    )
    state = await wait_until(handle, idle_after(2), timeout=60)
    assert state.counters.runs >= 2
    [entry] = state.children
    assert entry["status"] == "completed" and entry["lastResult"] == "late"
    assert worker.store.messages.list(handle.id)[-1].content == "received"


async def test_thread_state_lookups_and_receiving_side(
    start_worker, temporal_client, scripted_server
):
    """ThreadState reads the registry and the parent; receives_messages: side_b makes the
    child's first message an assistant one, so side B speaks first (§7.1, §7.2)."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "subagent_create",
                            "arguments": {
                                "agent": "researcher",
                                "name": "sim",
                                "message": "opening line",
                            },
                        },
                        {"name": "look_around", "arguments": {}},
                    ]
                },
                {"text": "ok"},
            ]
        },
    )
    side_a = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "look_around", "arguments": {}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "a done"}}]},
            ]
        },
    )
    side_b = add_script(scripted_server, {"replies": [{"text": "the simulated user answers"}]})
    definitions = family(
        parent,
        side_a,
        side_b,
        parent_tools=[
            {"name": "researcher", "resumable": {"receives_messages": "side_b"}},
            "look_around",
        ],
        extra=[
            define_tool(name="look_around", description="Look", args=NoArgs, execute=look_around)
        ],
    )
    definitions.prompts["researcher_prompt"].tools.append("look_around")
    worker = await start_worker(definitions)
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    [entry] = state.children
    parent_view = tool_result(worker.store, handle.id, "look_around")["result"]
    assert parent_view["children"] == [{"name": "sim", "status": entry["status"]}]
    assert parent_view["child_thread_agent"] == "researcher" and parent_view["parent"] is None
    child_view = tool_result(worker.store, entry["reference"], "look_around")["result"]
    assert child_view["parent"] == handle.id and child_view["children"] == []
    assert child_view["arguments"] == {
        "agent": "researcher",
        "name": "sim",
        "message": "opening line",
    }
    assert parent_view["arguments"] == {}
    child_messages = worker.store.messages.list(entry["reference"])
    assert child_messages[0].role == "assistant" and child_messages[0].content == "opening line"
    first_b = next(r for r in scripted_server.requests if r["model"] == side_b)
    assert first_b["messages"][1:] == [{"role": "user", "content": "opening line"}]
    assert entry["lastResult"] == "a done"
