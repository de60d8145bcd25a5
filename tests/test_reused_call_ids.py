"""A model that reuses a tool-call id in a later turn loses no fact: each call's
`tool.started` and `tool.result` are stored, under ids of the call's own result message."""

from __future__ import annotations

from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    start_thread,
    wait_until,
)


async def test_a_reused_call_id_keeps_both_calls_events(
    start_worker, temporal_client, scripted_server
):
    """Two turns whose model calls `weather` with the same call id `call_1`: two results,
    two `tool.started` and two `tool.result` events, each naming its own message."""
    call = {"id": "call_1", "name": "weather", "arguments": {"city": "Oslo"}}
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "*", "replies": [{"tool_calls": [call]}, {"text": "Sunny."}]},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Oslo?"}]
    )
    await wait_until(handle, idle_after(1))
    await handle.signal("queue_message", {"role": "user", "content": "And again?"})
    await wait_until(handle, idle_after(2))
    results = [m for m in worker.store.messages.list(handle.id) if m.role == "tool"]
    assert [m.tool_call_id for m in results] == ["call_1", "call_1"]
    started = worker.store.events.read(handle.id, types=["tool.started"])
    done = worker.store.events.read(handle.id, types=["tool.result"])
    assert len(started) == 2 and len(done) == 2
    assert [e.payload["messageId"] for e in done] == [m.id for m in results]
    validator = event_schema_validator()
    for event in [*started, *done]:
        validator.validate(event.to_wire())
    await handle.signal("terminate", {})
