"""Drill 3: idle threads are evicted from a small workflow cache and woken by a message;
every answer is right, and the drill compares wake latency of evicted and cached threads.

Nothing in the drill queries a thread before the end (a query would load it into the cache):
it waits on `turn.completed` events in the store instead.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from support import agent_definitions, local_stack, read, scratch_config, start_thread
from temporalio.client import Client, WorkflowHandle

from drills.common import Report, first, note, summary, transcript_problems, wait_for_events
from weft.store import Store
from weft.workers.agent_worker import AgentWorker

DEFAULT_THREADS = 100
CACHE = 5
# Without a pause the first wake queues behind the cache churn of the first turns (4-8 s).
SETTLE = 3.0


def _script(threads: int) -> dict[str, object]:
    turns = []
    for i in range(threads):
        turns.append({"match": f"wake {i:04d}.", "replies": [{"text": f"awake {i:04d}"}]})
        turns.append({"match": f"again {i:04d}.", "replies": [{"text": f"still awake {i:04d}"}]})
    turns.append({"match": "*", "replies": [{"text": "hello"}]})
    return {"turns": turns}


def _turns(store: Store, thread_id: str) -> int:
    return len(store.events.read(thread_id, types=["turn.completed"]))


async def _wake(store: Store, handle: WorkflowHandle[Any, Any], text: str, turns: int) -> float:
    """Seconds from sending `text` to the thread's turn.completed number `turns` in the store."""
    began = time.perf_counter()
    await handle.signal("queue_message", {"role": "user", "content": text})
    while await asyncio.to_thread(_turns, store, handle.id) < turns:
        if time.perf_counter() - began > 120:
            raise TimeoutError(f"{handle.id} did not answer {text!r} within 120 s")
        await asyncio.sleep(0.005)
    return time.perf_counter() - began


def _completion_order(store: Store, ids: list[str]) -> list[str]:
    """Thread ids by when their first turn completed: the last ones may still be cached."""
    stamps = {t: store.events.read(t, types=["turn.completed"])[0].timestamp for t in ids}
    return sorted(ids, key=lambda t: stamps[t])


async def run(report: Report, args: argparse.Namespace) -> None:
    """Start the threads, let them go idle, then wake each one twice (evicted, then cached)."""
    threads = args.threads or DEFAULT_THREADS
    with tempfile.TemporaryDirectory() as tmp:
        async with local_stack() as (client, scripted, _address):
            scripted.set_script("wake", _script(threads))
            async with AgentWorker(
                client,
                scratch_config(Path(tmp)),
                definitions=agent_definitions("wake"),
                task_queue=f"drill-eviction-{uuid.uuid4().hex[:8]}",
                scripted=scripted,
                max_cached_workflows=CACHE,
            ) as worker:
                assert worker.store is not None
                await _drill(report, client, worker.store, worker.task_queue, threads)


async def _drill(report: Report, client: Client, store: Store, queue: str, threads: int) -> None:
    note(f"{threads} threads on one worker with max_cached_workflows={CACHE}")
    began = time.perf_counter()
    handles = await asyncio.gather(
        *(
            start_thread(
                client,
                queue,
                messages=[{"role": "user", "content": f"hello {i:04d}"}],
            )
            for i in range(threads)
        )
    )
    await wait_for_events(store, [h.id for h in handles], "turn.completed", timeout=600)
    report.figure("first turn of every thread", f"{time.perf_counter() - began:.1f} s")
    await asyncio.sleep(SETTLE)  # let the last idle flushes and cache evictions finish
    index = {h.id: i for i, h in enumerate(handles)}
    by_id = {h.id: h for h in handles}
    order = await asyncio.to_thread(_completion_order, store, list(by_id))
    evicted: list[float] = []
    cached: list[float] = []
    for thread_id in order:  # the last to go idle are woken last, long after their eviction
        i = index[thread_id]
        evicted.append(await _wake(store, by_id[thread_id], f"wake {i:04d}.", 2))
        cached.append(await _wake(store, by_id[thread_id], f"again {i:04d}.", 3))
    report.figure("wake latency, evicted thread", summary(evicted))
    report.figure("wake latency, cached thread (woken again at once)", summary(cached))
    states = await asyncio.gather(*(read(h) for h in handles))
    wrong = [
        f"{h.id}: {s.last_outcome!r}"
        for i, (h, s) in enumerate(zip(handles, states, strict=True))
        if s.last_outcome != f"still awake {i:04d}" or s.counters.turns != 3
    ]
    report.check("every woken thread answers its own message", not wrong, first(wrong))
    roles = ["user", "assistant"] * 3

    def transcripts() -> list[str]:
        return [
            p
            for i, h in enumerate(handles)
            for p in transcript_problems(
                store, h.id, roles, {1: "hello", 3: f"awake {i:04d}", 5: f"still awake {i:04d}"}
            )
        ]

    problems = await asyncio.to_thread(transcripts)
    report.check("transcripts complete and in order after replay", not problems, first(problems))
