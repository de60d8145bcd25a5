"""Drill 5: SIGTERM on a `weft worker` whose threads are all inside a tool. Tools shorter
than the graceful timeout finish on that worker; longer ones are handed back and retried;
a second worker then completes every thread, and no tool's effect happens twice."""

from __future__ import annotations

import argparse
import asyncio
import time

from support import start_thread
from temporalio.client import Client
from worker_process import WorkerProcess

from drills.common import (
    FINAL_TEXT,
    Report,
    check_all_complete,
    check_slow_threads,
    drill_stack,
    event_counts,
    first,
    note,
    report_history,
    wait_for_events,
)
from weft.store import Store

DEFAULT_THREADS = 20
GRACE = 10.0  # AgentWorker's graceful_shutdown_seconds, which `weft worker` uses
SHORT, LONG = 3.0, GRACE + 5  # a tool that fits in the grace period, and one that cannot
EVERY_LONG = 5  # one thread in five runs the long tool


def _script() -> dict[str, object]:
    def turn(match: str, seconds: float) -> dict[str, object]:
        call = {"name": "slow_note", "arguments": {"text": "drain", "seconds": seconds}}
        return {"match": match, "replies": [{"tool_calls": [call]}, {"text": FINAL_TEXT}]}

    return {"turns": [turn("long tool", LONG), turn("*", SHORT)]}


async def run(report: Report, args: argparse.Namespace) -> None:
    """Put every thread inside a tool on worker A, SIGTERM A, finish on worker B."""
    threads = args.threads or DEFAULT_THREADS
    async with drill_stack("drain", _script()) as stack:
        draining = WorkerProcess(stack.config_file)
        successor = WorkerProcess(stack.config_file)
        try:
            await draining.start()
            await _drill(
                report, stack.client, stack.store, draining, successor, stack.queue, threads
            )
        finally:
            await draining.stop()
            await successor.stop()


async def _drill(
    report: Report,
    client: Client,
    store: Store,
    draining: WorkerProcess,
    successor: WorkerProcess,
    queue: str,
    threads: int,
) -> None:
    longs = {i for i in range(threads) if i % EVERY_LONG == 0}
    note(f"{threads} threads in a tool ({len(longs)} of {LONG:.0f} s, the rest {SHORT:.0f} s)")
    handles = await asyncio.gather(
        *(
            start_thread(
                client,
                queue,
                agent="drill_agent",
                options={"heartbeatTimeoutSeconds": 5},
                messages=[
                    {
                        "role": "user",
                        "content": f"drain drill thread {i}" + (" long tool" if i in longs else ""),
                    }
                ],
            )
            for i in range(threads)
        )
    )
    ids = [h.id for h in handles]
    await wait_for_events(store, ids, "tool.started", timeout=300)
    sent = time.perf_counter()
    await draining.stop()  # SIGTERM, then wait for the process to exit
    drained = time.perf_counter() - sent
    assert draining.process is not None
    finished = await asyncio.to_thread(event_counts, store, "tool.result")
    report.figure(
        "drain time",
        f"{drained:.1f} s from SIGTERM to exit (graceful timeout {GRACE:.0f} s); "
        f"{len(finished)} of {threads} in-flight tools finished before exit",
    )
    report.check(
        "the worker exits cleanly within its graceful timeout",
        draining.process.returncode == 0 and drained <= GRACE + 5,
        f"exit code {draining.process.returncode}, {drained:.1f} s",
    )
    short_ids = {h.id for i, h in enumerate(handles) if i not in longs}
    unfinished = sorted(short_ids - set(finished))
    report.check(
        "tools shorter than the timeout finished on the draining worker",
        not unfinished,
        first(unfinished),
    )
    began = time.perf_counter()
    await successor.start()
    try:
        await wait_for_events(store, short_ids, "turn.completed", timeout=300)
        short_done = f"{time.perf_counter() - began:.1f} s"
    except TimeoutError:
        short_done = "not within 300 s"
    await check_all_complete(report, store, ids, timeout=300)
    report.figure(
        "completion on the second worker",
        f"threads whose tool finished: {short_done}; all (handed-back tools rerun "
        f"{LONG:.0f} s): {time.perf_counter() - began:.1f} s after it started",
    )
    await check_slow_threads(report, store, handles, 2)
    await _check_hand_back(report, client, store, ids, short_ids)


async def _check_hand_back(
    report: Report, client: Client, store: Store, ids: list[str], short_ids: set[str]
) -> None:
    def attempts() -> dict[str, list[int]]:
        return {
            t: [e.payload["attempt"] for e in store.events.read(t, types=["tool.started"])]
            for t in ids
        }

    started = await asyncio.to_thread(attempts)
    handed_back = sorted(t for t in ids if len(started[t]) > 1)
    retried_short = [t for t in handed_back if t in short_ids]
    report.figure("handed back", f"{len(handed_back)} tool calls retried on the second worker")
    report.check("no finished tool was run again", not retried_short, first(retried_short))
    runs = await asyncio.to_thread(lambda: {t: store.values.get(t, "runs") for t in ids})
    twice = [f"{t}: {n}" for t, n in runs.items() if n != 1]
    report.check("every tool's effect happened exactly once", not twice, first(twice))
    await report_history(report, client, ids)
