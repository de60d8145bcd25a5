"""Drill 1: two `weft worker` processes share a task queue and a PostgreSQL store; one is
SIGKILLed while every thread has work in flight, and every thread still completes once."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from support import local_stack
from temporalio.client import Client
from worker_process import WorkerProcess

from drills.common import (
    Report,
    attempts_after_first,
    check_all_complete,
    check_slow_threads,
    event_counts,
    longest_pauses,
    note,
    postgres_database,
    report_history,
    slow_script,
    start_slow_threads,
    summary,
    task_queue,
    wait_for_events,
    write_worker_config,
)
from weft.store import Store

DEFAULT_THREADS = 50
STEPS = 4
TOOL_SECONDS = 1.0


async def run(report: Report, args: argparse.Namespace) -> None:
    """Start the threads on two workers, kill one mid-run, wait for all, check the store."""
    threads = args.threads or DEFAULT_THREADS
    with postgres_database() as url, tempfile.TemporaryDirectory() as tmp:
        async with local_stack() as (client, scripted, address):
            scripted.set_script(
                "drill", slow_script(STEPS, tool_seconds=TOOL_SECONDS, chunk_delay_ms=100)
            )
            queue = task_queue("sigkill")
            config = write_worker_config(
                Path(tmp),
                address=address,
                task_queue=queue,
                store_url=url,
                model_url=scripted.openai_base_url,
            )
            store = await asyncio.to_thread(Store.open, url)  # migrated before workers race
            workers = [WorkerProcess(config), WorkerProcess(config)]
            try:
                await asyncio.gather(*(w.start() for w in workers))
                await _drill(report, client, store, workers, queue, threads)
            finally:
                for worker in workers:
                    await worker.stop()
                store.close()


async def _drill(
    report: Report,
    client: Client,
    store: Store,
    workers: list[WorkerProcess],
    queue: str,
    threads: int,
) -> None:
    note(f"{threads} threads x {STEPS} steps on 2 workers (PostgreSQL store)")
    began = time.perf_counter()
    handles = await start_slow_threads(client, queue, threads, STEPS, "sigkill")
    ids = [h.id for h in handles]
    # Kill once half the threads are past their first model call: work is in flight everywhere.
    await wait_for_events(store, ids, "tool.started", threads=threads // 2, timeout=300)
    completed_before = len(await asyncio.to_thread(event_counts, store, "turn.completed"))
    killed_at = time.perf_counter()
    await workers[0].kill()
    note(f"SIGKILLed worker 1 after {killed_at - began:.1f} s ({completed_before} threads done)")
    await check_all_complete(report, store, ids, timeout=900)
    finished = time.perf_counter()
    report.figure("completion time", f"{finished - began:.1f} s from start")
    report.figure(
        "recovery after the kill", f"{finished - killed_at:.1f} s from SIGKILL to last thread idle"
    )

    await check_slow_threads(report, store, handles, STEPS)
    pauses = await asyncio.to_thread(longest_pauses, store, ids)
    report.figure("longest pause per thread (between two events)", summary(pauses, "s", 1))

    retried = await report_history(report, client, ids)
    model_resets = await asyncio.to_thread(attempts_after_first, store, ids, "model.requested")
    tool_retries = await asyncio.to_thread(attempts_after_first, store, ids, "tool.started")
    report.figure(
        "retry facts in the store",
        f"model.requested reset {model_resets}, tool.started attempt>1 {tool_retries}",
    )
    report.check("the kill hit in-flight work (some activity retried)", retried > 0)
    runs = await asyncio.to_thread(lambda: sum(store.values.get(t, "runs") or 0 for t in ids))
    expected = threads * (STEPS - 1)
    report.figure(
        "tool bodies run",
        f"{runs} for {expected} tool calls ({runs - expected} re-run after the kill: at-least-once)",
    )
