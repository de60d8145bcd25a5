"""Idle threads: what thousands of threads that had a few turns and now wait cost.

Run: `.venv/bin/python bench/bench_idle.py [--threads 1000,10000] [--turns 2] [--wakes 50]
[--cache 250] [--concurrency 64] [--idle-continue 5] [--trace-memory] [--forget-results]
[--malloc-trim]`.

One `weft worker`-equivalent subprocess (this file with `--serve`, so its workflow cache,
`max_cached_workflows`, can be set) on a tuned dev server, a scratch SQLite store and the
scripted model. Threads are added in steps up to each size of `--threads`; each thread is
started and asked `--turns` short questions (each `ask` waits for its turn to end), at most
`--concurrency` threads at a time. Once every thread waits and the worker's CPU is quiet,
at each size it prints:

- the worker's RSS (`/proc/PID/status`) against the same worker with 0 threads and with
  its workflow cache just full (`--cache` threads): what idle threads cost beyond the cache;
  and how many threads each of its per-thread caches holds (they follow the workflow
  cache: store/thread_cache_budget.py), as the worker prints them on SIGUSR1, with what
  the recovery interceptor's book of finished results holds (workers/recovery.py: every
  activity's result of the last 5 minutes, whatever the number of threads);
- store bytes per thread beyond its messages and events: SQLite's `dbstat` page bytes of
  every table and its indexes, less `messages`, `message_history` and `events`, less what
  the store held before the first thread, divided by the threads (and the rows' own payload
  bytes, which leave out the pages' free space);
- wake latency: `--wakes` random threads that went idle long ago (evicted from the cache)
  are each sent a message, then another at once (now cached); each latency is the signal
  until the turn's `turn.completed` is in the store. Printed: p50 / p95 of each, and the
  median of the paired ratios evicted / cached (target ≤ 1.5×). Every other thread is
  started with `continueAsNewIdleSeconds` of `--idle-continue` (the default behaviour,
  with a shorter wait: docs/long-threads.md), the rest with null; the benchmark waits
  until each of the first kind has continued as new, and wakes the two kinds alternately,
  so a wake of the short new run and one of the whole run are measured in one run.

Eager workflow start needs the worker in the client's own process, so it does not apply to
a worker subprocess; the start phase gets its speed from concurrency instead.

`--trace-memory` runs the worker under `tracemalloc` (slower) and prints, from each size to
the next, the allocation sites whose live Python memory grew most, and the growth of
everything Python allocated against the RSS's: what RSS grew by beyond it is native (the
Temporal core SDK's Rust heap, SQLite's, the allocator's free lists).

`--forget-results` also prints, at each checkpoint, the worker's RSS once that book has let
every result expire (on SIGHUP), as its sweep does 5 minutes after the last activity: what
the idle threads themselves hold. `--malloc-trim` then prints the worker's RSS after glibc's
`malloc_trim(0)` (on SIGUSR2): the part of the RSS that was the allocator's free pages.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import gc
import json
import math
import random
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from bench_recovery import phases  # noqa: E402
from drills.common import note, summary, task_queue, write_worker_config  # noqa: E402
from drills.eviction import _wake as wake  # noqa: E402
from processes import WorkerSubprocess, cpu_seconds  # noqa: E402
from support import local_stack  # noqa: E402
from temporalio.client import Client  # noqa: E402

from weft.client.threads import Threads  # noqa: E402
from weft.store import Store  # noqa: E402

AGENT = "drill_agent"  # bench/drills/definitions: the `drill` script on the scripted model
SCRIPT = {"replies": [{"text": "ok"}]}  # every user message gets one short answer
# What a thread holds of its conversation; every other table is the per-thread overhead.
CONVERSATION_TABLES = {"messages", "message_history", "events"}
MIB = 1024 * 1024


def rss_bytes(pid: int) -> tuple[int, int]:
    """(resident set now, its peak) of a live process, in bytes."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.split()
    return int(fields["VmRSS"][0]) * 1024, int(fields["VmHWM"][0]) * 1024


@dataclass
class TableBytes:
    """One table's bytes in the SQLite file, its indexes included."""

    pages: int  # whole pages (what the file holds)
    payload: int  # the rows' own bytes (without the pages' free space)


def store_bytes(db_file: Path) -> dict[str, TableBytes]:
    """Bytes per table (indexes counted with their table), from SQLite's `dbstat`; the
    WAL's pages are read through the pager, so nothing committed is missed."""
    with sqlite3.connect(f"file:{db_file}?mode=ro", uri=True) as connection:
        owner = dict(connection.execute("SELECT name, tbl_name FROM sqlite_master"))
        sizes: dict[str, TableBytes] = {}
        query = "SELECT name, SUM(pgsize), SUM(payload) FROM dbstat GROUP BY name"
        for name, pages, payload in connection.execute(query):
            table = owner.get(name, name)
            kept = sizes.setdefault(table, TableBytes(0, 0))
            kept.pages += int(pages)
            kept.payload += int(payload)
    return sizes


def overhead_per_thread(
    now: dict[str, TableBytes], before: dict[str, TableBytes], threads: int
) -> tuple[float, float, list[tuple[str, float]]]:
    """(page bytes, payload bytes, the largest tables' page bytes) per thread, beyond the
    conversation tables and what the store held before the first thread."""

    def grown(table: str) -> TableBytes:
        base = before.get(table, TableBytes(0, 0))
        return TableBytes(now[table].pages - base.pages, now[table].payload - base.payload)

    extra = {t: grown(t) for t in now if t not in CONVERSATION_TABLES}
    pages = sum(b.pages for b in extra.values()) / threads
    payload = sum(b.payload for b in extra.values()) / threads
    largest = sorted(((t, b.pages / threads) for t, b in extra.items()), key=lambda p: -p[1])
    return pages, payload, [p for p in largest if p[1] > 0][:5]


async def quiet(pid: int, *, below: float = 0.05, timeout: float = 60) -> float:
    """Wait until the worker uses less than `below` of a core over a second (idle flushes
    and evictions done); returns the seconds waited."""
    began = time.perf_counter()
    while time.perf_counter() - began < timeout:
        cpu = cpu_seconds(pid)
        await asyncio.sleep(1.0)
        if cpu_seconds(pid) - cpu < below:
            break
    return time.perf_counter() - began


async def signalled_reply(worker: WorkerSubprocess, sig: signal.Signals, mark: str) -> str | None:
    """Send the worker `sig` and wait (bounded) for the line it prints starting with `mark`;
    the rest of that line, or None when it did not print one."""
    assert worker.process is not None
    worker.process.send_signal(sig)
    for _ in range(100):
        found = [line for line in worker.output().splitlines() if line.startswith(mark)]
        if found:
            return found[-1].removeprefix(mark)
        await asyncio.sleep(0.1)
    return None


# What the worker does on each signal the benchmark sends it at a checkpoint, and the word
# it prints when done: `trimmed` glibc's malloc_trim(0) (`--malloc-trim`); `forgot` every
# result its recovery book kept, as the book's sweep does 5 minutes after the last activity
# (`--forget-results`).
TRIM, FORGET = (signal.SIGUSR2, "trimmed"), (signal.SIGHUP, "forgot")


async def rss_after(
    worker: WorkerSubprocess, action: tuple[signal.Signals, str], asked: int
) -> int:
    """The worker's RSS once it has done `action` (TRIM or FORGET) for the `asked`-th time."""
    sig, done = action
    if await signalled_reply(worker, sig, f"{done} #{asked}: ") is None:
        raise TimeoutError(f"the worker did not report `{done}` after {sig.name}")
    return rss_bytes(worker.pid)[0]


async def caches_held(worker: WorkerSubprocess, asked: int) -> str:
    """The worker's per-thread caches' threads and its recovery book's results, as it
    prints them on its `asked`-th SIGUSR1."""
    held = await signalled_reply(worker, signal.SIGUSR1, f"caches held #{asked}: ")
    return "(not reported)" if held is None else held


def sheds(index: int) -> bool:
    """Whether thread `index` continues as new when idle: every other thread, so the two
    kinds of wake are measured side by side in one run."""
    return index % 2 == 0


async def converse(threads: Threads, turns: int, index: int, idle_continue: float) -> str:
    """Start one thread and ask it `turns` questions, each waited for; returns its id."""
    idle = idle_continue if sheds(index) else None
    handle = await threads.start(AGENT, options={"continueAsNewIdleSeconds": idle})
    for turn in range(turns):
        result = await threads.ask(handle.id, f"thread {index} turn {turn}", timeout=300)
        if result.status != "completed":
            raise RuntimeError(f"{handle.id} turn {turn} ended {result.status}: {result.error}")
    return handle.id


async def add_threads(
    threads: Threads,
    ids: list[str],
    count: int,
    turns: int,
    concurrency: int,
    idle_continue: float,
) -> float:
    """Add `count` threads of `turns` turns to `ids`, `concurrency` at a time; seconds."""
    gate = asyncio.Semaphore(concurrency)
    began = time.perf_counter()
    first = len(ids)

    async def one(index: int) -> str:
        async with gate:
            thread_id = await converse(threads, turns, index, idle_continue)
            if (index + 1) % 500 == 0:
                note(f"{index + 1} threads conversed ({time.perf_counter() - began:.0f} s)")
            return thread_id

    ids.extend(await asyncio.gather(*(one(first + i) for i in range(count))))
    return time.perf_counter() - began


@dataclass
class Wakes:
    """Latencies of each kind of wake, and where each wake's time went (from history)."""

    evicted: list[float]
    cached: list[float]
    evicted_phases: list[dict[str, float]]
    cached_phases: list[dict[str, float]]


async def wake_pairs(
    client: Client,
    store: Store,
    candidates: list[str],
    wakes: int,
    turns_done: int,
    found: Wakes,
) -> list[str]:
    """Wake random long-idle threads twice each, evicted first, then cached; into `found`.
    A thread is woken once in a run (`candidates` loses it). Returns the threads woken."""
    woken = random.sample(candidates, min(wakes, len(candidates)))
    for thread_id in woken:
        candidates.remove(thread_id)
        handle = client.get_workflow_handle(thread_id)
        found.evicted.append(await wake(store, handle, "wake up.", turns_done + 1))
        found.evicted_phases.append(await phases(client, thread_id, 0.0))
        found.cached.append(await wake(store, handle, "and again.", turns_done + 2))
        found.cached_phases.append(await phases(client, thread_id, 0.0))
    return woken


def idle_continuations(db_file: Path) -> int:
    """How many threads have continued as new when idle (a woken thread that did again
    counts once)."""
    with sqlite3.connect(f"file:{db_file}?mode=ro", uri=True) as connection:
        query = (
            "SELECT count(DISTINCT thread_id) FROM events WHERE type = 'thread.updated' "
            "AND json_extract(data, '$.payload.continuedAsNew.reason') = 'idle'"
        )
        return int(connection.execute(query).fetchone()[0])


async def all_shed(db_file: Path, expected: int, timeout: float) -> float:
    """Wait until `expected` threads have continued as new when idle; seconds waited."""
    began = time.perf_counter()
    while (found := await asyncio.to_thread(idle_continuations, db_file)) < expected:
        if time.perf_counter() - began > timeout:
            raise TimeoutError(f"{found} of {expected} threads continued as new when idle")
        await asyncio.sleep(0.5)
    return time.perf_counter() - began


def show_wakes(label: str, found: Wakes) -> None:
    """One kind of thread's wakes: evicted and warm, their phases and the paired ratio."""
    ratios = [e / c for e, c in zip(found.evicted, found.cached, strict=True)]
    print(f"  {label}:")
    print(f"    wake latency, evicted thread: {summary(found.evicted)}")
    print(f"      medians: {show_phases(found.evicted_phases)}")
    print(f"    wake latency, warm thread (woken again at once): {summary(found.cached)}")
    print(f"      medians: {show_phases(found.cached_phases)}")
    verdict = "met" if statistics.median(ratios) <= 1.5 else "NOT met"
    print(
        f"    evicted / warm, median of {len(ratios)} paired ratios: "
        f"{statistics.median(ratios):.2f}x (target <= 1.5x: {verdict})",
        flush=True,
    )


def show_phases(found: list[dict[str, float]]) -> str:
    """Medians, in ms, of where the wakes' time went."""
    parts = (
        ("task start", "signal to workflow task start"),
        ("replay", "the workflow task (a replay when evicted)"),
    )
    return ", ".join(
        f"{label} {statistics.median(p.get(key, 0.0) for p in found) * 1000:.0f} ms"
        for key, label in (*parts, ("model", "model.call"))
    )


def mib(value: float) -> str:
    return f"{value / MIB:.0f} MiB"


async def main(args: argparse.Namespace) -> None:
    sizes = sorted(args.threads)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        db_file = tmp / "weft.db"
        async with local_stack() as (client, scripted, address):
            scripted.set_script("drill", SCRIPT)
            config = write_worker_config(
                tmp,
                address=address,
                task_queue=task_queue("idle"),
                store_url=f"sqlite:///{db_file}",
                model_url=scripted.openai_base_url,
            )
            store = await asyncio.to_thread(Store.open, f"sqlite:///{db_file}")
            traced = ["--trace-folder", str(config.parent)] if args.trace_memory else []
            worker = WorkerSubprocess(
                sys.executable,
                __file__,
                "--serve",
                str(config),
                "--cache",
                str(args.cache),
                *traced,
            )
            try:
                await worker.start()
                await measure(args, sizes, client, store, worker, config, db_file)
            finally:
                await worker.stop()
                store.close()


async def measure(
    args: argparse.Namespace,
    sizes: list[int],
    client: Client,
    store: Store,
    worker: WorkerSubprocess,
    config: Path,
    db_file: Path,
) -> None:
    """The checkpoints: 0 threads, the cache just full, then each size."""
    from weft.workers.config import load_config

    threads = Threads(client, task_queue=load_config(config).temporal.task_queue)
    await quiet(worker.pid)
    empty_rss, _ = rss_bytes(worker.pid)
    empty_store = await asyncio.to_thread(store_bytes, db_file)
    print(f"worker RSS with 0 threads (polling, nothing run yet): {mib(empty_rss)}", flush=True)
    ids: list[str] = []
    woken: set[str] = set()  # each thread is woken once: its turns are then counted
    cache_rss: int | None = None
    cache_trimmed: int | None = None
    cache_forgotten: int | None = None
    last_rss = empty_rss
    for asked, size in enumerate(
        sorted({*sizes, args.cache} if args.cache < max(sizes) else sizes)
    ):
        added = size - len(ids)
        took = await add_threads(
            threads, ids, added, args.turns, args.concurrency, args.idle_continue
        )
        shedding = sum(1 for index in range(len(ids)) if sheds(index))
        shed_after = await all_shed(db_file, shedding, args.idle_continue + 300)
        settled = await quiet(worker.pid)
        rss, peak = rss_bytes(worker.pid)
        print(
            f"== {size} threads x {args.turns} turns (workflow cache {args.cache}): "
            f"start phase {took:.1f} s for the {added} newest ({added / took:.1f} threads/s, "
            f"{added * args.turns / took:.1f} turns/s); every other thread continued as new "
            f"when idle {shed_after:.1f} s later, then quiet after {settled:.1f} s",
            flush=True,
        )
        print(f"  threads each worker cache holds: {await caches_held(worker, asked)}")
        if args.trace_memory and asked > 0:
            print(memory_growth(config.parent, asked, rss - last_rss), flush=True)
        last_rss = rss
        forgotten = await rss_after(worker, FORGET, asked) if args.forget_results else None
        trimmed = await rss_after(worker, TRIM, asked) if args.malloc_trim else None
        if size == args.cache and size not in sizes:
            cache_rss, cache_forgotten, cache_trimmed = rss, forgotten, trimmed
            print(f"  worker RSS with the cache just full: {mib(rss)} (peak so far {mib(peak)})")
            if forgotten is not None:
                print(f"    with the kept results forgotten: {mib(forgotten)}")
            if trimmed is not None:
                print(f"    after malloc_trim(0): {mib(trimmed)}")
            continue
        beyond = f", {mib(rss - cache_rss)} above the cache just full" if cache_rss else ""
        print(
            f"  worker RSS: {mib(rss)} (peak {mib(peak)}); {mib(rss - empty_rss)} above 0 "
            f"threads{beyond}; {(rss - empty_rss) / size / 1024:.1f} KiB per thread overall",
            flush=True,
        )
        if forgotten is not None:
            than = (
                f", {mib(forgotten - cache_forgotten)} above the cache's" if cache_forgotten else ""
            )
            print(f"    with the kept results forgotten: {mib(forgotten)}{than}", flush=True)
        if trimmed is not None:
            than = f", {mib(trimmed - cache_trimmed)} above the cache's" if cache_trimmed else ""
            print(f"    after malloc_trim(0): {mib(trimmed)}{than}", flush=True)
        sized = await asyncio.to_thread(store_bytes, db_file)
        pages, payload, largest = overhead_per_thread(sized, empty_store, size)
        top = ", ".join(f"{t} {b:.0f}" for t, b in largest)
        conversation = sum(sized[t].pages for t in CONVERSATION_TABLES if t in sized) / size
        print(
            f"  store per thread beyond messages and events: {pages:.0f} bytes of pages "
            f"({payload:.0f} bytes of row payload; target < 1024); largest: {top}; "
            f"messages and events {conversation:.0f} bytes per thread",
            flush=True,
        )
        # Threads that went idle well before the newest `cache` ones: evicted long ago.
        candidates = [t for t in ids[: max(0, len(ids) - 2 * args.cache)] if t not in woken]
        if not candidates:
            print("  wake latency: no evicted thread to wake (threads <= 2 x cache)")
            continue
        shed = [t for t in candidates if sheds(ids.index(t))]
        kept = [t for t in candidates if not sheds(ids.index(t))]
        # Alternated, so both kinds meet the same moments of a shared machine.
        found_shed, found_kept = Wakes([], [], [], []), Wakes([], [], [], [])
        for _ in range(args.wakes):
            woken.update(await wake_pairs(client, store, shed, 1, args.turns, found_shed))
            woken.update(await wake_pairs(client, store, kept, 1, args.turns, found_kept))
        show_wakes(
            f"threads that continued as new when idle (continueAsNewIdleSeconds "
            f"{args.idle_continue:g}, the default behaviour)",
            found_shed,
        )
        show_wakes("threads that keep their run (continueAsNewIdleSeconds null)", found_kept)


# Frames kept per traced allocation: enough to reach weft's code from inside pydantic or the
# SDK.
TRACE_FRAMES = 24


def memory_growth(folder: Path, asked: int, rss_growth: int, top: int = 12) -> str:
    """What the worker's traced Python memory grew by from checkpoint `asked - 1` to
    `asked`, in all and at the sites that grew most, against the RSS's growth."""
    import tracemalloc

    before = tracemalloc.Snapshot.load(str(folder / f"memory-{asked - 1}.snapshot"))
    after = tracemalloc.Snapshot.load(str(folder / f"memory-{asked}.snapshot"))
    stats = after.compare_to(before, "traceback")
    python = sum(stat.size_diff for stat in stats)
    lines = [
        f"  traced Python memory grew {mib(python)}, the RSS {mib(rss_growth)}: "
        f"{mib(rss_growth - python)} native or free; the call paths that grew most "
        "(where it was allocated <- the innermost weft frame that led there):"
    ]
    for stat in sorted(stats, key=lambda st: st.size_diff, reverse=True)[:top]:
        frames = list(stat.traceback)  # innermost last
        ours = next((f for f in reversed(frames) if _ours(f.filename)), None)
        lines.append(
            f"    {stat.size_diff / 1024:+9.1f} KiB {stat.count_diff:+8d} blocks  "
            f"{_where(frames[-1])}" + (f" <- {_where(ours)}" if ours is not None else "")
        )
    return "\n".join(lines)


def _ours(filename: str) -> bool:
    return filename.startswith(f"{ROOT}/") and "/.venv/" not in filename


def _where(frame: Any) -> str:
    return f"{'/'.join(Path(frame.filename).parts[-3:])}:{frame.lineno}"


async def serve(config_file: Path, cache: int, trace_folder: Path | None) -> None:
    """The worker subprocess: `weft worker` with `max_cached_workflows=cache`, until SIGTERM;
    with `trace_folder`, under tracemalloc, a snapshot written there at each report."""
    if trace_folder is not None:
        import tracemalloc

        tracemalloc.start(TRACE_FRAMES)
    from weft.cli.temporal_client import client_from_config
    from weft.workers.agent_worker import AgentWorker
    from weft.workers.config import load_config

    config = load_config(config_file)
    client = await client_from_config(config)
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    async with AgentWorker(client, config, max_cached_workflows=cache) as worker:
        assert worker.store is not None
        caches, asked = worker.store.caches, 0

        def report() -> None:
            nonlocal asked
            if trace_folder is not None:
                import tracemalloc

                snapshot = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(False, tracemalloc.__file__)]
                )
                snapshot.dump(str(trace_folder / f"memory-{asked}.snapshot"))
            results, pickled = worker.recovering.kept_results()
            print(
                f"caches held #{asked}: {json.dumps(caches.held())}; "
                f"the recovery book: {results} results, {pickled} bytes",
                flush=True,
            )
            asked += 1

        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, report)

        def trim() -> None:
            # glibc's allocator returns the free pages of its arenas to the system: what
            # the RSS loses here was free, not held.
            ctypes.CDLL("libc.so.6").malloc_trim(0)

        def forget() -> None:
            worker.recovering.forget_expired(math.inf)  # every kept result expires
            gc.collect()

        for (sig, done), action in ((TRIM, trim), (FORGET, forget)):
            asyncio.get_running_loop().add_signal_handler(sig, counted(action, done))
        print(f"idle worker: polling {worker.task_queue} (cache {cache})", flush=True)
        await stop.wait()


def counted(action: Callable[[], None], done: str) -> Callable[[], None]:
    """`action` as a signal handler that prints `<done> #<n>: done` after its n-th run
    (from 0), the line `rss_after` waits for."""
    runs = 0

    def handler() -> None:
        nonlocal runs
        action()
        print(f"{done} #{runs}: done", flush=True)
        runs += 1

    return handler


def sizes_arg(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", type=sizes_arg, default=[1000, 10000])
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--wakes", type=int, default=50)
    parser.add_argument("--cache", type=int, default=250, help="the worker's workflow cache")
    parser.add_argument("--concurrency", type=int, default=64, help="threads started at once")
    parser.add_argument(
        "--idle-continue",
        type=float,
        default=5.0,
        help="continueAsNewIdleSeconds of every other thread (the rest: null); short, so "
        "the benchmark need not wait the default 900 s",
    )
    parser.add_argument(
        "--trace-memory",
        action="store_true",
        help="trace the worker's Python allocations: what grew from each size to the next",
    )
    parser.add_argument(
        "--malloc-trim",
        action="store_true",
        help="at each checkpoint, also print the worker's RSS after glibc's malloc_trim(0): "
        "how much of it was the allocator's free pages",
    )
    parser.add_argument(
        "--forget-results",
        action="store_true",
        help="at each checkpoint, also print the worker's RSS once the recovery book has "
        "let its finished results expire (what it does 5 minutes after the last activity)",
    )
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)  # the worker subprocess
    parser.add_argument("--trace-folder", type=Path, help=argparse.SUPPRESS)  # its snapshots
    parsed = parser.parse_args()
    if parsed.serve is not None:
        asyncio.run(serve(parsed.serve, parsed.cache, parsed.trace_folder))
    else:
        asyncio.run(main(parsed))
