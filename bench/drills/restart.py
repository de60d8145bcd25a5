"""Drill 2: the Temporal dev server, with a persistent db file, is stopped and started again
in the middle of live threads; every thread finishes, and the drill times the outage."""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from worker_process import WorkerProcess

from drills.common import (
    Report,
    check_all_complete,
    check_slow_threads,
    event_counts,
    note,
    report_history,
    slow_script,
    start_slow_threads,
    task_queue,
    wait_for_events,
    write_worker_config,
)
from weft.store import Store
from weft.transport.connection import connect
from weft.workers.config import load_config
from weft.workers.dev_server import DevServer, free_port
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.search_attributes import ensure_search_attributes

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_THREADS = 20
STEPS = 4
STARTS = ("model.requested", "tool.started")


def persistent_server(db_file: Path) -> DevServer:
    """A dev server tuned as in temporal-dev.yml, on free ports, keeping its state in a file."""
    tuned = load_config(ROOT / "temporal-dev.yml", environ={}).temporal.dev_server
    config = tuned.model_copy(update={"ui_port": free_port(), "db_file": str(db_file)})
    return DevServer(config, address=f"127.0.0.1:{free_port()}", persistent=True, ui=False)


def activity_starts(store: Store) -> int:
    """Model and tool attempts begun so far: these only grow while the server dispatches."""
    return sum(sum(event_counts(store, kind).values()) for kind in STARTS)


async def run(report: Report, args: argparse.Namespace) -> None:
    """Run the threads on one worker process and restart the server under them."""
    threads = args.threads or DEFAULT_THREADS
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        server = persistent_server(tmp / "temporal.db")
        url = f"sqlite:///{tmp / 'weft.db'}"
        async with ScriptedModelServer({"drill": _script()}) as scripted:
            await server.start()
            store = await asyncio.to_thread(Store.open, url)
            queue = task_queue("restart")
            config = write_worker_config(
                tmp,
                address=server.address,
                task_queue=queue,
                store_url=url,
                model_url=scripted.openai_base_url,
            )
            worker = WorkerProcess(config)
            try:
                await _drill(report, server, store, worker, queue, threads)
            finally:
                await worker.stop()
                await server.stop()
                store.close()


def _script() -> dict[str, object]:
    return slow_script(STEPS, tool_seconds=1.0, chunk_delay_ms=100)


async def _drill(
    report: Report,
    server: DevServer,
    store: Store,
    worker: WorkerProcess,
    queue: str,
    threads: int,
) -> None:
    client = await connect(server.address)
    await ensure_search_attributes(client, "default")
    await worker.start()
    note(f"{threads} threads x {STEPS} steps on one worker; the server keeps a db file")
    began = time.perf_counter()
    handles = await start_slow_threads(client, queue, threads, STEPS, "restart")
    ids = [h.id for h in handles]
    await wait_for_events(store, ids, "tool.started", timeout=300)
    done_before = len(await asyncio.to_thread(event_counts, store, "turn.completed"))
    starts_before = await asyncio.to_thread(activity_starts, store)
    stopping = time.perf_counter()
    await server.stop()
    stopped = time.perf_counter()
    await asyncio.sleep(1)  # a real outage, not just a reconnect
    await server.start()
    back = time.perf_counter()
    note(f"server restarted {stopping - began:.1f} s in ({done_before} threads done before)")
    report.figure(
        "downtime",
        f"{back - stopping:.1f} s (stop {stopped - stopping:.1f} s, 1 s down, "
        f"start until listening {back - stopped - 1:.1f} s)",
    )
    while await asyncio.to_thread(activity_starts, store) <= starts_before:
        if time.perf_counter() - back > 120:
            break
        await asyncio.sleep(0.05)
    report.figure(
        "time to recovery",
        f"{time.perf_counter() - back:.1f} s from listening again to the first new model or "
        "tool attempt",
    )
    await check_all_complete(report, store, ids, timeout=600)
    finished = time.perf_counter()
    report.figure(
        "completion time",
        f"{finished - began:.1f} s from start, {finished - back:.1f} s after the restart",
    )
    await check_slow_threads(report, store, handles, STEPS)
    await report_history(report, client, ids)
