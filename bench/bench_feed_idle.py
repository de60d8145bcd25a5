"""Idle cost of the event feed: `weft serve`'s CPU with idle SSE clients.

Run: `.venv/bin/python bench/bench_feed_idle.py [--clients 50] [--seconds 20]`. The API is
served in its own process (bench_stream.py's server: the app `weft serve` builds, a Temporal
dev server for the thread lookups) over a SQLite store, and, when reachable, over
PostgreSQL; `--clients` SSE clients follow silent threads (one each) and nothing is
written. The server's CPU time over `--seconds` is read from /proc; a server with no client
is measured the same way first.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from contextlib import suppress
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
from bench_stream import (  # noqa: E402
    TOKEN,
    Deliveries,
    ServerProcess,
    drop_database,
    postgres_database,
    start_threads,
    subscribe,
)
from processes import cpu_seconds  # noqa: E402
from support import ephemeral_dev_server  # noqa: E402

from weft.store import Store  # noqa: E402
from weft.transport.connection import connect  # noqa: E402


async def idle_cpu(
    server: ServerProcess, threads: list[str], clients: int, seconds: float
) -> float:
    """The server's CPU, % of one core, while `clients` SSE clients wait on silent threads."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    deliveries = Deliveries()
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, limits=limits, timeout=None
    ) as http:
        tasks = [
            asyncio.create_task(subscribe(http, threads[i], deliveries)) for i in range(clients)
        ]
        try:
            while deliveries.connected < clients:
                if failed := [t for t in tasks if t.done()]:
                    failed[0].result()
                await asyncio.sleep(0.05)
            await asyncio.sleep(1.0)  # settled: every stream waits in the feed
            cpu, began = cpu_seconds(server.pid), time.monotonic()
            await asyncio.sleep(seconds)
            return (cpu_seconds(server.pid) - cpu) / (time.monotonic() - began) * 100
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)


async def main(clients: int, seconds: float) -> None:
    dev = ephemeral_dev_server()
    await dev.start()
    with tempfile.TemporaryDirectory() as tmp:
        address = dev.address
        client = await connect(address)
        threads = await start_threads(client, clients)
        stores: list[tuple[str, str, str | None]] = [
            ("SQLite", f"sqlite:///{Path(tmp) / 'weft.db'}", None)
        ]
        if (pg := postgres_database()) is not None:
            stores.append(("PostgreSQL", pg[0], pg[1]))
        try:
            for name, url, _ in stores:
                Store.open(url).close()  # migrated
                async with ServerProcess(url, address) as server:
                    await asyncio.sleep(2.0)
                    cpu, began = cpu_seconds(server.pid), time.monotonic()
                    await asyncio.sleep(seconds)
                    alone = (cpu_seconds(server.pid) - cpu) / (time.monotonic() - began) * 100
                    busy = await idle_cpu(server, threads, clients, seconds)
                print(
                    f"{name}: server CPU with no client {alone:.2f} % of a core, "
                    f"with {clients} idle SSE clients {busy:.2f} %",
                    flush=True,
                )
        finally:
            for thread_id in threads:
                with suppress(Exception):
                    await client.get_workflow_handle(thread_id).terminate("bench done")
            for _, _, database in stores:
                if database is not None:
                    drop_database(database)
            await dev.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    asyncio.run(main(args.clients, args.seconds))
