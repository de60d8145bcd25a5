"""When a step's start events reach the store (activities/pending_events.py), end to end:
a quick step stores them with its result, a slow tool has them stored while it runs, and
a tool's own event is never stored ahead of its `tool.started`."""

from __future__ import annotations

import asyncio
from typing import Any

from support import NoteArgs, add_script, agent_definitions, idle_after, start_thread, wait_until

from weft.definitions import define_tool
from weft.workers.scripted_model import ScriptedModelServer


async def slow(state: Any, args: NoteArgs) -> str:
    """Runs long enough that its start must be shown before it ends."""
    await asyncio.sleep(1.5)
    return "slept"


async def announce(state: Any, args: NoteArgs) -> str:
    """Writes an event of its own at once, before its call's start could be stored."""
    await state.emit("announced", {"text": args.text})
    return "announced"


def _definitions(script: str) -> Any:
    return agent_definitions(script, tools=["slow", "announce"]).add(
        define_tool(name="slow", description="Sleeps", args=NoteArgs, execute=slow),
        define_tool(name="announce", description="Emits", args=NoteArgs, execute=announce),
    )


def _script(scripted_server: ScriptedModelServer, tool: str) -> str:
    return add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": tool, "arguments": {"text": "t"}}]},
                {"text": "done"},
            ]
        },
    )


async def test_a_slow_tool_is_shown_started_while_it_runs(
    start_worker, temporal_client, scripted_server
):
    worker = await start_worker(_definitions(_script(scripted_server, "slow")))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    await handle.signal("queue_message", {"role": "user", "content": "sleep"})

    def types() -> list[str]:
        return [e.type for e in worker.store.events.read(handle.id, limit=1000)]

    deadline = asyncio.get_running_loop().time() + 30
    while "tool.started" not in types():
        assert asyncio.get_running_loop().time() < deadline, "tool.started was never stored"
        await asyncio.sleep(0.05)
    # Seen while the tool still sleeps: its result is not stored yet.
    assert "tool.result" not in types()
    await wait_until(handle, idle_after(1))
    stored = types()
    assert stored.index("tool.started") < stored.index("tool.result")


async def test_a_tools_own_event_comes_after_its_start(
    start_worker, temporal_client, scripted_server
):
    worker = await start_worker(_definitions(_script(scripted_server, "announce")))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    await handle.signal("queue_message", {"role": "user", "content": "announce"})
    await wait_until(handle, idle_after(1))
    events = worker.store.events.read(handle.id, limit=1000)
    order = [e.type for e in events if e.type != "model.delta"]
    emitted = next(i for i, e in enumerate(events) if e.type == "run.status")
    started = next(i for i, e in enumerate(events) if e.type == "tool.started")
    result = next(i for i, e in enumerate(events) if e.type == "tool.result")
    assert started < emitted < result, order
    # Each model call's events keep their order too: requested, then completed.
    requested = [i for i, e in enumerate(events) if e.type == "model.requested"]
    completed = [i for i, e in enumerate(events) if e.type == "model.completed"]
    assert len(requested) == len(completed) == 2
    assert all(r < c for r, c in zip(requested, completed, strict=True)), order
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
