"""A warning is written when it happens: an idle thread stores a refused
signal's `runtime.warning` at once, not with its next turn."""

from __future__ import annotations

import asyncio

from support import add_script, agent_definitions, event_schema_validator, start_thread, wait_until


async def test_an_idle_threads_warning_reaches_the_store_at_once(
    start_worker, temporal_client, scripted_server
):
    """A malformed `queue_message` to an idle thread: its `runtime.warning` is stored while
    the thread stays idle, with no other turn or signal to carry it."""
    script = add_script(scripted_server, {"replies": [{"text": "unused"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    await handle.signal("queue_message", {"role": "wizard", "content": "hello"})
    await wait_until(handle, lambda s: s.warnings == 1)
    deadline = asyncio.get_running_loop().time() + 30
    while not (stored := worker.store.events.read(handle.id, types=["runtime.warning"])):
        assert asyncio.get_running_loop().time() < deadline, "the warning was never stored"
        await asyncio.sleep(0.05)
    assert "role" in stored[0].payload["message"]
    event_schema_validator().validate(stored[0].to_wire())
    state = await wait_until(handle, lambda s: s.status == "waiting_input")
    assert state.counters.turns == 0
    await handle.signal("terminate", {})
