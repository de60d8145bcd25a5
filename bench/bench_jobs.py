"""Jobs: a batch of items against the scripted model, on `weft worker` processes, with and
without a rate, on SQLite and PostgreSQL, one worker and then two.

Run: `.venv/bin/python bench/bench_jobs.py [--items 10000] [--workers 1,2]
[--store sqlite,postgres] [--rate 120rpm] [--window 60] [--rate-items 300]
[--concurrency 50] [--items-per-run 200]`.

Starts a dev server and the scripted model server (in this process), then for each store
and worker count: a fresh store (a new SQLite file; a new PostgreSQL database at
127.0.0.1:5432, WEFT_TEST_POSTGRES_URL overrides, dropped afterwards; skipped with a note
when no server answers), that many `weft worker` subprocesses on one task queue, and:
- a job of `--items` items (each a task: a thread asked `item N`, answered at once) with
  no rate: items/s from the job's creation to its end;
- with `--rate`, a job of `--rate-items` items under that rate (item starts a minute, in
  a `--window` seconds window): the achieved rate over the steady part of the run (the
  first and last window left out; whole multiples of the window's allowance counted, so
  whole admission cycles, whatever their phase: `steady_rate`), as a ratio to the limit
  (target 0.95 to 1.0); and the most starts recorded in any window against the
  window's allowance (never over it). A start is recorded once its task has started, a
  little after its admission, so the recorded times jitter by that delay.
For every job: its `JobRun` runs and the largest run's history (events, bytes). For every
worker process: its peak RSS (the kernel's VmHWM, read from /proc every second).
Last, on PostgreSQL, the two-worker/one-worker ratio of items/s.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import select

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_load_compare import postgres_reachable  # noqa: E402
from drills.common import postgres_database  # noqa: E402
from processes import WorkerSubprocess, peak_rss_mib  # noqa: E402
from support import local_stack  # noqa: E402
from temporalio.client import Client  # noqa: E402

from weft.activities.job_admit import job_limit_key  # noqa: E402
from weft.client.jobs import Jobs  # noqa: E402
from weft.contract.jobs import JobRate, progress_line  # noqa: E402
from weft.store import Store  # noqa: E402
from weft.store.rate_limits import rate_limit_grants  # noqa: E402
from weft.workers.scripted_model.server import ScriptedModelServer  # noqa: E402

AGENT = "helper"
SCRIPT_NAME = "bench_jobs"
SCRIPT = {"replies": [{"text": "done"}]}
STORES = ("sqlite", "postgres")


@dataclass
class JobFigures:
    """One job's run: what it did and what it took."""

    items: int
    status: str
    completed: int
    failed: int
    seconds: float
    runs: int
    history_events: int
    history_bytes: int
    starts: list[float] = field(default_factory=list)  # job.item.started times, sorted
    arrivals: list[float] = field(default_factory=list)  # model requests' arrival, sorted
    grants: list[float] = field(default_factory=list)  # the ledger's admissions, sorted

    @property
    def per_second(self) -> float:
        return self.items / self.seconds


@dataclass
class Outcome:
    """One store and worker count."""

    store: str
    workers: int
    free: JobFigures
    rated: JobFigures | None
    peak_rss: list[float]  # MiB, per worker process


@dataclass(frozen=True)
class RateFigures:
    """A rated job's starts against its limit."""

    steady_per_minute: float  # over the steady part (module docstring)
    counted: int  # the starts that rate counts
    peak: int  # the most starts in any window
    allowed: int  # the window's allowance


def steady_rate(starts: list[float], window: float, per_minute: int) -> RateFigures:
    """The rate of `starts` (sorted) over the steady part of the run, and the most starts
    in any window.

    The steady part begins at the first start after the first window and ends before the
    last window, and spans a whole number of the window's allowance: from start i to
    start i + k * allowance. A limiter at its limit admits the allowance once per window
    (in a burst or spread out), so whole multiples of it count whole cycles whatever their
    phase. A run too short for one such span after the first window is measured from its
    first start."""
    allowed = max(1, int(per_minute * window / 60))
    peak = max(
        (bisect.bisect_left(starts, s + window) - i for i, s in enumerate(starts)), default=0
    )
    if not starts:
        return RateFigures(0.0, 0, peak, allowed)
    first = bisect.bisect_left(starts, starts[0] + window)
    end = bisect.bisect_left(starts, starts[-1] - window)  # the last window's first start
    if end - first < allowed:
        first, end = 0, len(starts) - 1
    last = first + (end - first) // allowed * allowed
    span = starts[last] - starts[first]
    rate = 60 * (last - first) / span if span > 0 else 0.0
    return RateFigures(rate, last - first, peak, allowed)


def write_definitions(root: Path, provider_url: str) -> Path:
    """A definitions folder (agent `helper` on the scripted model's `SCRIPT_NAME`) and a
    `providers` entry reaching this process's scripted model server."""
    files: dict[str, Any] = {
        f"agents/{AGENT}.yaml": {"sideA": {"prompt": "job_prompt"}},
        "prompts/job_prompt.yaml": {
            "toolDescription": "answers items",
            "model": "job_model",
            "prompt": "Answer the item.",
            "tools": [],
        },
        "models/job_model.yaml": {"provider": "scripted", "model": SCRIPT_NAME},
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(content))
    return root


def write_config(tmp: Path, address: str, queue: str, store_url: str, model_url: str) -> Path:
    """A `weft worker` config on the bench's definitions and store."""
    config = {
        "temporal": {"address": address, "taskQueue": queue},
        "store": {"url": store_url},
        "definitions": str(tmp / "definitions"),
        "codec": {"keysFile": str(tmp / "no-codec-keys")},
        "providers": {"scripted": {"kind": "openai", "baseUrl": model_url, "apiKey": "x"}},
    }
    path = tmp / f"worker-{queue}.yml"
    path.write_text(yaml.safe_dump(config))
    return path


async def histories(client: Client, job_id: str) -> tuple[int, int, int]:
    """(runs, the most events in one run, the most bytes in one run) of the job."""
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{job_id}'")]
    events = size = 0
    for run in runs:
        history = await client.get_workflow_handle(job_id, run_id=run.run_id).fetch_history()
        events = max(events, len(history.events))
        size = max(size, len(history.to_json().encode()))
    return len(runs), events, size


async def run_job(
    client: Client,
    scripted: ScriptedModelServer,
    store: Store,
    queue: str,
    items: int,
    args: argparse.Namespace,
    rate: JobRate | None,
) -> JobFigures:
    """One job of `items` items, waited for; its figures."""
    jobs = Jobs(client, store, task_queue=queue)
    scripted.clear_requests()
    ledger = GrantWatch(store, job_limit_key(rate.key)) if rate is not None else None
    began = time.perf_counter()
    job = await jobs.create(
        AGENT,
        [f"item {n}" for n in range(items)],
        concurrency=args.concurrency,
        rate=rate,
        items_per_run=args.items_per_run,
    )
    try:
        async for state in jobs.watch(job.job_id, every=args.every):
            print(f"    {time.perf_counter() - began:7.1f}s {progress_line(state)}", flush=True)
    finally:
        if ledger is not None:
            await ledger.stop()
    seconds = time.perf_counter() - began
    done = jobs.get(job.job_id)
    starts = sorted(
        datetime.fromisoformat(e.timestamp).timestamp()
        for e in await asyncio.to_thread(store.jobs.events, job.job_id, limit=10 * items + 100)
        if e.type == "job.item.started"
    )
    runs, events, size = await histories(client, job.job_id)
    return JobFigures(
        items=items,
        status=done.status,
        completed=done.counts.completed,
        failed=done.counts.failed,
        seconds=seconds,
        runs=runs,
        history_events=events,
        history_bytes=size,
        starts=starts,
        arrivals=sorted(r["received_at"] for r in scripted.requests),
        grants=sorted(ledger.grants.values()) if ledger is not None else [],
    )


class GrantWatch:
    """The start of every place the ledger grants on `key`: its rows are read every second
    (a grant is deleted only once it has counted for a whole window and a later request
    comes), so none is missed."""

    def __init__(self, store: Store, key: str) -> None:
        self.grants: dict[str, float] = {}
        self._store = store
        self._query = select(rate_limit_grants.c.grant_id, rate_limit_grants.c.starts_at).where(
            rate_limit_grants.c.limit_key == key
        )
        self._task = asyncio.create_task(self._loop())

    def _read(self) -> None:
        with self._store.engine.connect() as connection:
            self.grants.update({row[0]: row[1] for row in connection.execute(self._query)})

    async def _loop(self) -> None:
        while True:
            await asyncio.to_thread(self._read)
            await asyncio.sleep(1)

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)
        await asyncio.to_thread(self._read)


class RssWatch:
    """Every worker process's peak RSS, read from /proc each second until stopped (and once
    more then), so a process's peak is kept even if it exits first."""

    def __init__(self, pids: list[int]) -> None:
        self.peaks = [0.0 for _ in pids]
        self._pids = pids
        self._task: asyncio.Task[None] | None = None

    def _sample(self) -> None:
        for n, pid in enumerate(self._pids):
            self.peaks[n] = max(self.peaks[n], peak_rss_mib(pid) or 0.0)

    async def _loop(self) -> None:
        while True:
            self._sample()
            await asyncio.sleep(1)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        self._sample()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


@contextmanager
def fresh_store(store: str, tmp: Path) -> Iterator[str]:
    """The URL of an empty store of the kind named."""
    if store == "sqlite":
        yield f"sqlite:///{tmp / f'jobs-{uuid.uuid4().hex[:8]}.db'}"
    else:
        with postgres_database() as url:
            yield url


async def one_configuration(
    client: Client,
    address: str,
    scripted: ScriptedModelServer,
    tmp: Path,
    store_kind: str,
    workers: int,
    args: argparse.Namespace,
) -> Outcome:
    """Both jobs on `workers` worker processes over a fresh store."""
    with fresh_store(store_kind, tmp) as url:
        queue = f"jobs-bench-{uuid.uuid4().hex[:8]}"
        config = write_config(tmp, address, queue, url, scripted.openai_base_url)
        weft = Path(sys.executable).parent / "weft"
        processes = [
            WorkerSubprocess(str(weft), "--config", str(config), "worker") for _ in range(workers)
        ]
        # Migrated here, before the workers race to open it.
        store = await asyncio.to_thread(Store.open, url)
        watch: RssWatch | None = None
        try:
            await asyncio.gather(*(p.start() for p in processes))
            watch = RssWatch([p.pid for p in processes])
            watch.start()
            print(f"  {store_kind}, {workers} worker(s): {args.items} items, no rate", flush=True)
            free = await run_job(client, scripted, store, queue, args.items, args, None)
            rated = None
            if args.rate:
                rate = JobRate(
                    key=f"bench-{uuid.uuid4().hex[:6]}",
                    requests_per_minute=args.rate,
                    window_seconds=args.window,
                )
                print(
                    f"  {store_kind}, {workers} worker(s): {args.rate_items} items at "
                    f"{args.rate}/min ({args.window:g}s window)",
                    flush=True,
                )
                rated = await run_job(client, scripted, store, queue, args.rate_items, args, rate)
            await watch.stop()
        except BaseException:
            for p in processes:
                print(f"-- last output of a worker:\n{p.output()}", file=sys.stderr)
            raise
        finally:
            if watch is not None:
                await watch.stop()
            for p in processes:
                await p.stop()
            store.close()
    return Outcome(store_kind, workers, free, rated, watch.peaks)


def report(outcomes: list[Outcome], args: argparse.Namespace) -> None:
    print(
        f"\n== {args.items} items, concurrency {args.concurrency}, {args.items_per_run} items "
        "a run, the scripted model answering at once"
    )
    for o in outcomes:
        f = o.free
        print(f"  {o.store}, {o.workers} worker(s):")
        print(
            f"    no rate: {f.items} items {f.status} ({f.completed} completed, {f.failed} "
            f"failed) in {f.seconds:.1f}s: {f.per_second:.2f} items/s"
        )
        print(
            f"      {f.runs} JobRun runs; largest run history {f.history_events} events, "
            f"{f.history_bytes / 1024:.0f} KiB"
        )
        if o.rated is not None and args.rate:
            r = o.rated
            print(
                f"    at {args.rate}/min ({args.window:g}s window): {r.items} items {r.status} "
                f"in {r.seconds:.1f}s"
            )
            for label, times in (
                ("admissions (ledger)", r.grants),
                ("item starts", r.starts),
                ("model requests", r.arrivals),
            ):
                figures = steady_rate(times, args.window, args.rate)
                print(
                    f"      {label}: steady {figures.steady_per_minute:.1f}/min over "
                    f"{figures.counted} = {figures.steady_per_minute / args.rate:.3f} of the "
                    f"limit (target 0.95-1.0); most in any {args.window:g}s: {figures.peak} "
                    f"(limit {figures.allowed})"
                )
            print(
                f"      {r.runs} JobRun runs; largest run history {r.history_events} events, "
                f"{r.history_bytes / 1024:.0f} KiB"
            )
        print(f"    peak RSS per worker: {' + '.join(f'{m:.0f}' for m in o.peak_rss)} MiB")
    pg = {o.workers: o.free.per_second for o in outcomes if o.store == "postgres"}
    if 1 in pg and 2 in pg:
        print(f"  PostgreSQL, two workers / one: {pg[2] / pg[1]:.2f}x items/s")


async def main(args: argparse.Namespace) -> int:
    outcomes: list[Outcome] = []
    # The scripted server keeps the rated job's requests (their arrival times), no more.
    async with local_stack(max_records=max(args.rate_items, 1)) as (client, scripted, address):
        scripted.set_script(SCRIPT_NAME, SCRIPT)
        with tempfile.TemporaryDirectory(prefix="weft-bench-jobs-") as tmp_name:
            tmp = Path(tmp_name)
            write_definitions(tmp / "definitions", scripted.openai_base_url)
            for store_kind in args.store:
                if store_kind == "postgres" and not postgres_reachable():
                    continue
                for workers in args.workers:
                    outcomes.append(
                        await one_configuration(
                            client,
                            address,
                            scripted,
                            tmp,
                            store_kind,
                            workers,
                            args,
                        )
                    )
    report(outcomes, args)
    wrong = [o for o in outcomes for j in (o.free, o.rated) if j and j.status != "completed"]
    return 1 if wrong else 0


def _per_minute(text: str) -> int:
    value = int(text.removesuffix("rpm"))
    if value < 1:
        raise argparse.ArgumentTypeError(f"--rate must be at least 1rpm, not {text}")
    return value


def _list(kind: type, allowed: tuple[str, ...] | None = None) -> Any:
    def parse(text: str) -> list[Any]:
        values = [kind(v) for v in text.split(",") if v]
        if allowed is not None and (unknown := set(values) - set(allowed)):
            raise argparse.ArgumentTypeError(f"unknown: {', '.join(sorted(unknown))}")
        return values

    return parse


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--items", type=int, default=10_000, help="items of the job with no rate")
    parser.add_argument("--workers", type=_list(int), default=[1, 2], help="e.g. 1,2")
    parser.add_argument("--store", type=_list(str, STORES), default=list(STORES))
    parser.add_argument("--rate", type=_per_minute, help="item starts a minute, e.g. 120rpm")
    parser.add_argument("--window", type=float, default=60.0, help="the rate's window (s)")
    parser.add_argument("--rate-items", type=int, default=300, help="items of the rated job")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--items-per-run", type=int, default=200)
    parser.add_argument("--every", type=float, default=10.0, help="progress every (s)")
    raise SystemExit(asyncio.run(main(parser.parse_args())))
