"""A worker killed with SIGKILL inside a prompt tool: a fresh worker resumes there.

Workers run as real `weft worker` subprocesses on tests/crash_definitions; the thread's
prompt tool (`crash_advisor`) runs a slow tool, and the worker dies while it runs.
"""

from __future__ import annotations

import asyncio

from support import idle_after, start_thread, tool_calls_of, wait_until
from worker_process import crash_drill, worker_config

from weft.store import Store


async def _nested_tool_started(store: Store, thread_id: str) -> None:
    """Wait until the slow tool inside the prompt tool has started."""
    for _ in range(600):
        started = store.events.read(thread_id, types=["tool.started"])
        if any(e.payload.get("name") == "slow_note" for e in started):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the prompt tool's slow_note never started in {thread_id}")


async def test_sigkill_inside_a_prompt_tool(tmp_path, dev_server, temporal_client):
    """Killed while the prompt tool's own tool runs, the thread resumes inside the prompt
    tool on a fresh worker and finishes it: every message stored once, the effect once."""
    config_file = worker_config(tmp_path, dev_server.address)
    async with crash_drill(config_file) as (task_queue, first, second, store):
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="crash_prompter",
            options={"heartbeatTimeoutSeconds": 2},
            messages=[{"role": "user", "content": "prompt tool please"}],
        )
        await _nested_tool_started(store, handle.id)
        await first.kill()
        await second.start()
        await wait_until(handle, idle_after(1), timeout=90)
        messages = store.messages.list(handle.id)
        assert len({m.id for m in messages}) == len(messages)
        assert len({m.position for m in messages}) == len(messages)
        call_id = tool_calls_of(messages[1])[0].id
        assert [(m.role, m.depth, m.parent_id) for m in messages] == [
            ("user", 0, None),
            ("assistant", 0, None),
            ("user", 1, call_id),
            ("assistant", 1, call_id),
            ("tool", 1, call_id),
            ("assistant", 1, call_id),
            ("tool", 0, None),
            ("assistant", 0, None),
        ]
        assert messages[5].content == "advice noted"
        assert messages[-1].content == "The advisor finished."
        # The killed attempt never finished the tool body: its effect happened once.
        assert store.values.get(handle.id, "runs") == 1
        started = [
            e
            for e in store.events.read(handle.id, limit=10_000, types=["tool.started"])
            if e.payload.get("name") == "slow_note"
        ]
        assert [e.payload["attempt"] for e in started] == [1, 2]
        assert all(e.payload["parentToolCallId"] == call_id for e in started)
        await handle.signal("terminate", {})
