"""Fault drills (reduced size): provider faults, cache eviction, SIGTERM drain.

Each drill checks that every thread completes and that the retry facts are recorded.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from support import add_script, agent_definitions, idle_after, start_thread, wait_until


async def test_threads_recover_from_provider_faults(start_worker, temporal_client, scripted_server):
    """A dropped connection, a truncated stream and a 500 are each retried to success."""
    faults: dict[str, dict[str, Any]] = {
        "dropped": {"drop_after_chunks": 2, "times": 1},
        "truncated": {"truncate": True, "times": 1},
        "server_error": {"error": {"status": 500, "body": "boom"}, "times": 1},
    }
    for kind, fault in faults.items():
        script = add_script(
            scripted_server,
            {
                "replies": [
                    {"text": f"survived {kind} with a long enough reply", "chunk_size": 5, **fault}
                ]
            },
        )
        worker = await start_worker(agent_definitions(script))
        handle = await start_thread(
            temporal_client, worker.task_queue, messages=[{"role": "user", "content": kind}]
        )
        state = await wait_until(handle, idle_after(1))
        assert state.last_outcome == f"survived {kind} with a long enough reply", kind
        failed = worker.store.events.read(handle.id, types=["model.failed"])
        assert [e.payload["retryable"] for e in failed] == [True], kind
        requested = worker.store.events.read(handle.id, types=["model.requested"])
        assert [e.payload["attempt"] for e in requested] == [1, 2], kind
        assert [m.role for m in worker.store.messages.list(handle.id)] == ["user", "assistant"]


async def test_evicted_idle_threads_wake_correctly(start_worker, temporal_client, scripted_server):
    """With a one-entry workflow cache, idle threads are evicted and replayed on wake-up."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "second", "replies": [{"text": "woken"}]},
                {"match": "*", "replies": [{"text": "first answer"}]},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script), max_cached_workflows=1)
    handles = [
        await start_thread(
            temporal_client, worker.task_queue, messages=[{"role": "user", "content": "first"}]
        )
        for _ in range(4)
    ]
    for handle in handles:
        await wait_until(handle, idle_after(1))
    latencies = []
    for handle in handles:
        began = time.perf_counter()
        await handle.signal("queue_message", {"role": "user", "content": "second"})
        state = await wait_until(handle, idle_after(2))
        latencies.append(time.perf_counter() - began)
        assert state.last_outcome == "woken" and state.counters.messages == 4
    print(f"wake latency after eviction: {[round(x * 1000) for x in latencies]} ms")
    for handle in handles:
        roles = [m.role for m in worker.store.messages.list(handle.id)]
        assert roles == ["user", "assistant", "user", "assistant"]


async def test_concurrent_threads_on_one_worker(start_worker, temporal_client, scripted_server):
    """Twenty threads with tool steps run concurrently on one worker and all complete."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "n"}}], "repeat": 3},
                {"text": "all noted"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handles = await asyncio.gather(
        *(
            start_thread(
                temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
            )
            for _ in range(20)
        )
    )
    states = await asyncio.gather(*(wait_until(h, idle_after(1), timeout=120) for h in handles))
    assert all(s.last_outcome == "all noted" and s.counters.steps == 4 for s in states)
    for handle in handles:
        assert worker.store.values.get(handle.id, "notes") == ["n", "n", "n"]
