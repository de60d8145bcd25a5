"""The event stream: delivery latency from store commit to SSE client, and fan-out.

Run: `.venv/bin/python bench/bench_stream.py [--skip-postgres] [--events 200]`. For SQLite
(one feed, a change signal) and PostgreSQL (LISTEN/NOTIFY) it serves the API in its own
process (the same app `weft serve` builds, with a real Temporal dev server for the thread
lookups), writes events straight into the store from this process, one at a time, and
reads them with HTTP SSE clients (httpx) here. Latency runs from the moment the writer's
commit returned to the moment a client parsed the event's `id:` line. Scenarios: one
subscriber; 200 and 1000 subscribers of one thread; 1000 subscribers of 1000 threads.
The server's RSS and CPU are read from /proc; the clients share this process, so under
fan-out their parsing is in the figures too (the client CPU column says how much).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
import psycopg  # noqa: E402
from processes import cpu_seconds  # noqa: E402
from sqlalchemy import make_url  # noqa: E402
from support import ephemeral_dev_server  # noqa: E402
from temporalio.client import Client  # noqa: E402

from weft.contract.events import Event  # noqa: E402
from weft.contract.thread import WORKFLOW_TYPE  # noqa: E402
from weft.store import Store  # noqa: E402
from weft.transport.connection import connect  # noqa: E402

TOKEN = "bench-stream-token"
# Threads are workflows started on a queue no worker polls: running, and silent.
IDLE_QUEUE = "bench-stream-idle"
ADMIN_URL = os.environ.get("WEFT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
# A model.delta batch is about this big.
PAYLOAD = {"text": "x" * 120, "kind": "text"}


# ---- the server process -----------------------------------------------------------------


async def serve(store_url: str, temporal_address: str) -> None:
    """The API as `weft serve` builds it, until SIGTERM; prints its URL first."""
    from weft.api import create_api
    from weft.api.context import ApiContext
    from weft.api.event_feed import open_event_feed
    from weft.api.gateway import GatewayServer
    from weft.client.threads import Threads

    store = Store.open(store_url, migrate=False)
    client = await connect(temporal_address)
    feed = await open_event_feed(store)
    ctx = ApiContext(
        store=store,
        client=client,
        threads=Threads(client, task_queue=IDLE_QUEUE, store=store),
        feed=feed,
        task_queue=IDLE_QUEUE,
    )
    async with GatewayServer(create_api(ctx, TOKEN), port=0) as server:
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, server.stop)
        print(f"serving {server.url}", flush=True)
        await server.wait()
    await feed.close()
    store.close()


class ServerProcess:
    """This file run with `--serve` in a subprocess."""

    def __init__(self, store_url: str, temporal_address: str) -> None:
        self._args = (store_url, temporal_address)
        self.process: asyncio.subprocess.Process | None = None
        self.url = ""

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def __aenter__(self) -> ServerProcess:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--serve",
            *self._args,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        line = (await asyncio.wait_for(self.process.stdout.readline(), 60)).decode()
        if not line.startswith("serving "):
            raise RuntimeError(f"the server did not start: {line!r}")
        self.url = line.split()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()

    def rss_mb(self) -> float:
        """The server's resident memory now, in MB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")


# ---- clients and the writer -------------------------------------------------------------


@dataclass
class Deliveries:
    """When each subscriber saw each sequence of each thread (perf_counter seconds)."""

    seen: dict[tuple[str, int], list[float]] = field(default_factory=lambda: defaultdict(list))
    connected: int = 0


async def subscribe(http: httpx.AsyncClient, thread_id: str, deliveries: Deliveries) -> None:
    """One SSE client: counts itself connected at `retry`, then stamps every `id:` line."""
    headers = {"Accept": "text/event-stream", "Last-Event-ID": "0"}
    async with http.stream("GET", f"/threads/{thread_id}/events", headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"stream refused: {response.status_code}")
        async for line in response.aiter_lines():
            if line.startswith("id: "):
                deliveries.seen[(thread_id, int(line[4:]))].append(time.perf_counter())
            elif line.startswith("retry:"):
                deliveries.connected += 1


def write_events(
    store: Store, threads: list[str], count: int, spacing: tuple[float, float]
) -> dict[tuple[str, int], float]:
    """Append `count` events one at a time to random `threads`, each after a random pause
    (so commits fall anywhere in the poller's tick); the commit-returned time of each."""
    committed: dict[tuple[str, int], float] = {}
    for _ in range(count):
        time.sleep(random.uniform(*spacing))
        thread_id = random.choice(threads)
        event = Event(
            type="model.delta",
            event_id=f"evt-{uuid.uuid4().hex}",
            timestamp="2025-11-21T10:00:00.000Z",
            thread_id=thread_id,
            payload=PAYLOAD,
        )
        (stored,) = store.events.append([event])
        committed[(thread_id, stored.sequence or 0)] = time.perf_counter()
    return committed


# ---- one scenario -----------------------------------------------------------------------


@dataclass
class Row:
    backend: str
    scenario: str
    p50: float
    p99: float
    worst: float
    missing: int
    rss_mb: float
    rss_per_subscriber_kb: float
    server_cpu_ms_per_event: float
    client_cpu_ms_per_event: float


def pct(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def start_threads(client: Client, count: int) -> list[str]:
    ids = [f"bench-stream-{uuid.uuid4().hex[:12]}" for _ in range(count)]
    for start in range(0, count, 100):
        await asyncio.gather(
            *(
                client.start_workflow(WORKFLOW_TYPE, {"agent": "none"}, id=i, task_queue=IDLE_QUEUE)
                for i in ids[start : start + 100]
            )
        )
    return ids


async def scenario(
    backend: str,
    name: str,
    server: ServerProcess,
    store: Store,
    threads: list[str],
    subscribers: int,
    events: int,
    spacing: tuple[float, float],
) -> Row:
    deliveries = Deliveries()
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(
        base_url=server.url, headers=headers, limits=limits, timeout=None
    ) as http:
        # One stream first, so the baseline holds what any first request loads.
        warm_up = asyncio.create_task(subscribe(http, threads[0], Deliveries()))
        await asyncio.sleep(1.0)
        rss_before = server.rss_mb()
        tasks = [
            asyncio.create_task(subscribe(http, threads[i % len(threads)], deliveries))
            for i in range(subscribers)
        ]
        try:
            while deliveries.connected < subscribers:
                if failed := [t for t in tasks if t.done()]:
                    failed[0].result()
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)  # settled: every stream waits in the feed
            rss = server.rss_mb()
            server_cpu, client_cpu = cpu_seconds(server.pid), time.process_time()
            committed = await asyncio.to_thread(write_events, store, threads, events, spacing)
            per_thread = subscribers / len(threads)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and any(
                len(deliveries.seen.get(key, ())) < per_thread for key in committed
            ):
                await asyncio.sleep(0.05)
            server_cpu = cpu_seconds(server.pid) - server_cpu
            client_cpu = time.process_time() - client_cpu
        finally:
            for task in [warm_up, *tasks]:
                task.cancel()
            await asyncio.gather(warm_up, *tasks, return_exceptions=True)
    latencies = [
        (seen - at) * 1000 for key, at in committed.items() for seen in deliveries.seen.get(key, ())
    ]
    expected = sum(int(per_thread) for _ in committed)
    return Row(
        backend=backend,
        scenario=name,
        p50=pct(latencies, 50),
        p99=pct(latencies, 99),
        worst=max(latencies),
        missing=expected - len(latencies),
        rss_mb=rss,
        rss_per_subscriber_kb=(rss - rss_before) * 1024 / subscribers,
        server_cpu_ms_per_event=server_cpu * 1000 / events,
        client_cpu_ms_per_event=client_cpu * 1000 / events,
    )


async def bench_backend(
    backend: str, store_url: str, client: Client, address: str, events: int
) -> list[Row]:
    """Every scenario on a fresh server process, so its memory figures are its own."""
    store = Store.open(store_url)
    one, many = await start_threads(client, 1), await start_threads(client, 1000)
    plan = [
        ("1 subscriber", one, 1, events, (0.01, 0.04)),
        ("200 subscribers, 1 thread", one, 200, 20, (0.2, 0.3)),
        ("1000 subscribers, 1 thread", one, 1000, 20, (0.3, 0.4)),
        ("1000 subscribers, 1000 threads", many, 1000, events, (0.01, 0.04)),
    ]
    rows = []
    try:
        for name, threads, subscribers, count, spacing in plan:
            print(f"  {backend}: {name} ...", flush=True)
            async with ServerProcess(store_url, address) as server:
                rows.append(
                    await scenario(
                        backend, name, server, store, threads, subscribers, count, spacing
                    )
                )
    finally:
        for thread_id in [*one, *many]:
            with suppress(Exception):
                await client.get_workflow_handle(thread_id).terminate("bench done")
        store.close()
    return rows


def postgres_database() -> tuple[str, str] | None:
    """A fresh database (its URL and name) on the test server, or None when unreachable."""
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        print(f"PostgreSQL unreachable at {ADMIN_URL} ({error}); skipping it")
        return None
    name = f"weft_bench_stream_{uuid.uuid4().hex[:8]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False), name


def drop_database(name: str) -> None:
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        )
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


def table(rows: list[Row]) -> str:
    head = (
        f"{'backend':<10} {'scenario':<31} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
        f"{'missed':>6} {'RSS MB':>7} {'KB/sub':>7} {'srv CPU ms/ev':>13} {'cli CPU ms/ev':>13}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.backend:<10} {r.scenario:<31} {r.p50:7.1f} {r.p99:7.1f} {r.worst:7.1f} "
            f"{r.missing:6d} {r.rss_mb:7.1f} {r.rss_per_subscriber_kb:7.1f} "
            f"{r.server_cpu_ms_per_event:13.2f} {r.client_cpu_ms_per_event:13.2f}"
        )
    return "\n".join(lines)


async def main(args: argparse.Namespace) -> None:
    dev = ephemeral_dev_server()
    await dev.start()
    rows: list[Row] = []
    try:
        client = await connect(dev.address)
        with tempfile.TemporaryDirectory() as tmp:
            sqlite_url = f"sqlite:///{Path(tmp) / 'stream.db'}"
            rows += await bench_backend("sqlite", sqlite_url, client, dev.address, args.events)
        database = None if args.skip_postgres else postgres_database()
        if database is not None:
            url, name = database
            try:
                rows += await bench_backend("postgres", url, client, dev.address, args.events)
            finally:
                drop_database(name)
    finally:
        await dev.stop()
    print()
    print(f"event stream, {os.cpu_count()} cores; latency = commit returned → client parsed id")
    print(table(rows))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        asyncio.run(serve(*sys.argv[2:4]))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200, help="events in the latency runs")
    parser.add_argument("--skip-postgres", action="store_true")
    asyncio.run(main(parser.parse_args()))
