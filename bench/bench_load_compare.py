"""Load, side by side in one run: the hand-written floor against weft on SQLite and PostgreSQL.

Run: `.venv/bin/python bench/bench_load_compare.py [--threads 50,200] [--workers 1,2]
[--stores sqlite,postgresql] [--eager gated|off|always] [--sticky-schedule-to-start S]`.

N concurrent conversations of the benchmark scenario (bench/scenario.py) with 20 add calls
each: 21 steps a conversation. All N start at once on one task queue, on the same tuned
dev server (tests/support.py local_stack), one side after the other:
- the floor (bench/floor.py) on one worker process;
- weft on SQLite, on `weft worker` processes (each count in --workers);
- weft on PostgreSQL at 127.0.0.1:5432 (WEFT_TEST_POSTGRES_URL overrides), in a scratch
  database created and dropped here; skipped, with a note, when there is no server.
Every worker runs as its own subprocess so its CPU is measured alone (from /proc); the
bench process runs the scripted model server and the client. Printed per side: steps/s
(all steps over the wall time from the first start to the last conversation's end), the
ratio to the floor, each process's CPU as a share of one core and per step, and the
machine's busy share of all cores, and the share of it none of those processes used:
other load on a shared machine, which makes the figures unreliable when it is large.
From every thread's history: the share of activities started eagerly, the retried
attempts with what failed the attempt before, and the workflow tasks that timed out on the
worker's sticky queue (each then taken from the ordinary queue with the full history).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from drills.common import ADMIN_URL, postgres_database  # noqa: E402
from floor import WORKFLOW as FLOOR_WORKFLOW  # noqa: E402
from processes import (  # noqa: E402
    MachineCpu,
    WorkerSubprocess,
    cpu_of_named,
    cpu_seconds,
    temporal_server_pid,
)
from scenario import (  # noqa: E402
    AGENT,
    DEFINITIONS,
    SCRIPT,
    USER_TEXT,
    add_eager_flag,
    add_quick_tools_flag,
    add_script,
    bench_definitions,
    eager_worker,
    floor_input,
    use_quick_tools,
)
from sqlalchemy import select  # noqa: E402
from support import local_stack, read, start_thread  # noqa: E402
from temporalio.api.enums.v1 import TimeoutType  # noqa: E402
from temporalio.client import Client  # noqa: E402

from weft.store import Store  # noqa: E402
from weft.store.tables import events as events_table  # noqa: E402

CALLS = 20  # add calls per conversation: 21 steps with the answer
STEPS = CALLS + 1
TARGET_SHARE = 0.8
TURN_ENDS = ("turn.completed", "turn.failed")
WARM_UP = 2  # conversations each side runs, unmeasured, before the measured ones


@dataclass
class Outcome:
    """One side's run at one N."""

    side: str
    workers: int
    steps: int
    seconds: float
    worker_cpu: list[float] = field(default_factory=list)  # CPU seconds per worker process
    bench_cpu: float = 0.0  # the bench process: scripted model server and client
    server_cpu: float | None = None  # the Temporal dev server
    postgres_cpu: float = 0.0  # every PostgreSQL process (other users' too)
    machine_busy: float = 0.0  # busy CPU seconds, all cores
    machine_total: float = 1.0  # CPU seconds available, all cores

    def other_load(self) -> float:
        """The share of all cores busy with something this benchmark did not start."""
        ours = sum(self.worker_cpu) + self.bench_cpu + (self.server_cpu or 0) + self.postgres_cpu
        return max(0.0, self.machine_busy - ours) / self.machine_total

    problems: list[str] = field(default_factory=list)
    attempts: Attempts = field(default_factory=lambda: Attempts())

    @property
    def rate(self) -> float:
        return self.steps / self.seconds


# Called after the timing: (steps the conversations ran, what went wrong, what the histories
# say of the activity attempts).
Check = Callable[[], Awaitable[tuple[int, list[str], "Attempts"]]]


def worker_settings(eager: str, sticky_seconds: float | None) -> dict[str, Any]:
    """The `worker:` section of weft's worker config for the flags."""
    settings = eager_worker(eager)
    if sticky_seconds is not None:
        settings = settings.model_copy(update={"sticky_schedule_to_start_seconds": sticky_seconds})
    return settings.model_dump(by_alias=True, mode="json")


@dataclass
class Stack:
    """What every side shares: the dev server, its client, the model server, a folder."""

    client: Client
    scripted: Any
    address: str
    tmp: Path
    server_pid: int | None
    # The `worker:` section of weft's worker config (bench/scenario.py, eager_worker).
    worker_settings: dict[str, Any] = field(default_factory=dict)


async def measured(
    stack: Stack,
    side: str,
    workers: list[WorkerSubprocess],
    run: Callable[[int], Awaitable[Check]],
    conversations: int,
) -> Outcome:
    """Start the workers, warm them up, then time `run(conversations)` with every CPU
    counter; what it returns checks the outcome (steps done, problems) after the timing."""
    try:
        await asyncio.gather(*(w.start() for w in workers))
        # A fresh process pays its first imports and sandbox set-up once; not measured.
        await (await run(WARM_UP))()
        worker_before = [cpu_seconds(w.pid) for w in workers]
        server_before = cpu_seconds(stack.server_pid) if stack.server_pid else None
        postgres_before = cpu_of_named("postgres")
        machine_before, bench_before = MachineCpu.now(), time.process_time()
        began = time.perf_counter()
        check = await run(conversations)
        seconds = time.perf_counter() - began
        machine_after, bench_after = MachineCpu.now(), time.process_time()
        postgres_cpu = cpu_of_named("postgres") - postgres_before
        worker_cpu = [cpu_seconds(w.pid) - b for w, b in zip(workers, worker_before, strict=True)]
        server_cpu = (
            cpu_seconds(stack.server_pid) - server_before
            if stack.server_pid and server_before is not None
            else None
        )
        steps, problems, retried = await check()
    except BaseException:
        for worker in workers:
            print(f"-- last output of a {side} worker:\n{worker.output()}", file=sys.stderr)
        raise
    finally:
        for worker in workers:
            await worker.stop()
    return Outcome(
        side=side,
        workers=len(workers),
        steps=steps,
        seconds=seconds,
        worker_cpu=worker_cpu,
        bench_cpu=bench_after - bench_before,
        server_cpu=server_cpu,
        postgres_cpu=postgres_cpu,
        machine_busy=machine_after.busy - machine_before.busy,
        machine_total=machine_after.total - machine_before.total,
        problems=problems,
        attempts=retried,
    )


async def floor_side(stack: Stack, conversations: int) -> Outcome:
    """N floor workflows on one floor worker process."""
    queue = f"floor-load-{uuid.uuid4().hex[:8]}"
    worker = WorkerSubprocess(
        sys.executable,
        str(ROOT / "bench" / "floor_worker.py"),
        "--address",
        stack.address,
        "--task-queue",
        queue,
        "--model-url",
        stack.scripted.openai_base_url,
    )
    start = floor_input(bench_definitions())

    async def run(count: int) -> Check:
        handles = await asyncio.gather(
            *(
                stack.client.start_workflow(
                    FLOOR_WORKFLOW, start, id=f"floor-{uuid.uuid4().hex}", task_queue=queue
                )
                for _ in range(count)
            )
        )
        steps = await asyncio.gather(*(h.result() for h in handles))
        wrong = [f"{h.id}: {s} steps" for h, s in zip(handles, steps, strict=True) if s != STEPS]

        async def check() -> tuple[int, list[str], Attempts]:
            return sum(steps), wrong, await attempts_of(stack.client, [h.id for h in handles])

        return check

    return await measured(stack, "floor", [worker], run, conversations)


async def weft_side(
    stack: Stack, conversations: int, store_url: str, label: str, workers: int
) -> Outcome:
    """N AgentThreads on `workers` `weft worker` processes sharing one task queue and store."""
    queue = f"weft-load-{uuid.uuid4().hex[:8]}"
    config = write_worker_config(stack, queue, store_url)
    weft = Path(sys.executable).parent / "weft"
    processes = [
        WorkerSubprocess(str(weft), "--config", str(config), "worker") for _ in range(workers)
    ]
    # Migrated here, before the workers race to open it.
    store = await asyncio.to_thread(Store.open, store_url)

    async def run(count: int) -> Check:
        handles = await asyncio.gather(
            *(
                start_thread(
                    stack.client,
                    queue,
                    agent=AGENT,
                    options={"maxTotalSteps": STEPS + 5},
                    messages=[{"role": "user", "content": USER_TEXT}],
                )
                for _ in range(count)
            )
        )
        ids = [h.id for h in handles]
        ends = await wait_for_turn_ends(store, ids)
        return functools.partial(count_steps, stack.client, store, ids, ends)

    try:
        return await measured(stack, label, processes, run, conversations)
    finally:
        store.close()


def write_worker_config(stack: Stack, queue: str, store_url: str) -> Path:
    """A `weft worker` config on bench/definitions, whose `scripted` provider is the bench
    process's scripted model server."""
    config = {
        "temporal": {"address": stack.address, "taskQueue": queue},
        "store": {"url": store_url},
        "definitions": str(DEFINITIONS),
        "codec": {"keysFile": str(stack.tmp / "no-codec-keys")},
        "providers": {
            "scripted": {"kind": "openai", "baseUrl": stack.scripted.openai_base_url, "apiKey": "x"}
        },
        "worker": stack.worker_settings,
    }
    path = stack.tmp / f"worker-{queue}.yml"
    path.write_text(yaml.safe_dump(config))
    return path


async def wait_for_turn_ends(store: Store, ids: list[str], timeout: float = 1800) -> dict[str, str]:
    """Poll the store (one query) until every thread has ended its turn: {thread: event}."""
    wanted = set(ids)
    query = (
        select(events_table.c.thread_id, events_table.c.type)
        .where(events_table.c.type.in_(TURN_ENDS))
        .group_by(events_table.c.thread_id, events_table.c.type)
    )

    def ended() -> dict[str, str]:
        with store.engine.connect() as connection:
            return {row[0]: row[1] for row in connection.execute(query) if row[0] in wanted}

    deadline = time.monotonic() + timeout
    while len(found := await asyncio.to_thread(ended)) < len(wanted):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(found)}/{len(wanted)} threads ended their turn")
        await asyncio.sleep(0.2)
    return found


def failure_of(store: Store, thread_id: str) -> str:
    """What the thread's last failure event says, to tell a failed turn's cause."""
    failures = store.events.read(
        thread_id, limit=10_000, types=["model.failed", "tool.failed", "turn.failed"]
    )
    return "; ".join(f"{e.type}: {(e.payload or {}).get('error')}" for e in failures[-3:])


@dataclass
class Attempts:
    """What the threads' histories say of their activity attempts."""

    # Retries, by activity type and what failed the attempt before.
    retries: Counter[str] = field(default_factory=Counter)
    started: int = 0
    # Started as they were scheduled: eager tasks, which came with the workflow task's reply.
    eager: int = 0
    # Workflow tasks, and those that timed out waiting on the worker's sticky queue (each
    # rescheduled on the ordinary queue, where the worker takes it with the full history).
    workflow_tasks: int = 0
    sticky_timeouts: int = 0

    def __add__(self, other: Attempts) -> Attempts:
        return Attempts(
            self.retries + other.retries,
            self.started + other.started,
            self.eager + other.eager,
            self.workflow_tasks + other.workflow_tasks,
            self.sticky_timeouts + other.sticky_timeouts,
        )


# An eager task is started in the transaction that schedules it; a polled one at least a
# matching round trip later.
EAGER_WITHIN = timedelta(milliseconds=0.5)


async def attempts_of(client: Client, workflow_ids: list[str]) -> Attempts:
    """The activity attempts of these workflows (their histories)."""
    gate = asyncio.Semaphore(20)

    async def attempts_in(workflow_id: str) -> Attempts:
        async with gate:
            history = await client.get_workflow_handle(workflow_id).fetch_history()
        scheduled = {
            e.event_id: e
            for e in history.events
            if e.HasField("activity_task_scheduled_event_attributes")
        }
        found = Attempts()
        for e in history.events:
            if e.HasField("workflow_task_started_event_attributes"):
                found.workflow_tasks += 1
            if e.HasField("workflow_task_timed_out_event_attributes"):
                timeout = e.workflow_task_timed_out_event_attributes.timeout_type
                found.sticky_timeouts += timeout == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
            if not e.HasField("activity_task_started_event_attributes"):
                continue
            started = e.activity_task_started_event_attributes
            schedule = scheduled.get(started.scheduled_event_id)
            found.started += 1
            if schedule is not None and started.attempt == 1:
                queued = e.event_time.ToDatetime() - schedule.event_time.ToDatetime()
                found.eager += queued < EAGER_WITHIN
            if started.attempt > 1:
                cause = started.last_failure.message.splitlines()[0][:80] or "no failure"
                kind = (
                    schedule.activity_task_scheduled_event_attributes.activity_type.name
                    if schedule is not None
                    else "?"
                )
                found.retries[f"{kind} after {cause}"] += started.attempt - 1
        return found

    return sum(await asyncio.gather(*(attempts_in(w) for w in workflow_ids)), Attempts())


async def retries_of(client: Client, thread_id: str) -> str:
    """The thread's retried activities and what failed their earlier attempt (history)."""
    retries = (await attempts_of(client, [thread_id])).retries
    return "; ".join(f"{count} x {cause}" for cause, count in retries.items()) or (
        "no activity retried"
    )


async def count_steps(
    client: Client, store: Store, ids: list[str], ends: dict[str, str]
) -> tuple[int, list[str], Attempts]:
    """The steps the threads ran (thread_read counters), what went wrong, if anything, and
    what their histories say of the activity attempts."""
    gate = asyncio.Semaphore(20)

    async def steps_of(thread_id: str) -> int:
        async with gate:
            return (await read(client.get_workflow_handle(thread_id))).counters.steps

    steps = await asyncio.gather(*(steps_of(t) for t in ids))
    retried = await attempts_of(client, ids)
    problems = [
        f"{t}: {ends[t]} ({await asyncio.to_thread(failure_of, store, t)}; "
        f"retried: {await retries_of(client, t)})"
        for t in ids
        if ends[t] != "turn.completed"
    ]
    problems += [
        f"{t}: {s} steps (retried: {await retries_of(client, t)})"
        for t, s in zip(ids, steps, strict=True)
        if s != STEPS
    ]
    return sum(steps), problems, retried


def postgres_reachable() -> bool:
    """Whether the PostgreSQL server of ADMIN_URL answers; prints a note when it does not."""
    import psycopg

    try:
        psycopg.connect(ADMIN_URL, connect_timeout=5).close()
        return True
    except psycopg.OperationalError as error:
        print(f"note: weft on PostgreSQL skipped, no server at {ADMIN_URL}: {error}")
        return False


async def compare(
    stack: Stack, conversations: int, worker_counts: list[int], stores: list[str]
) -> list[Outcome]:
    """The floor, then weft on each store and worker count, at one N, one after the other."""
    print(f"\n== N={conversations}: {conversations} conversations x {STEPS} steps", flush=True)
    print("  floor ...", flush=True)
    outcomes = [await floor_side(stack, conversations)]
    for workers in worker_counts if "sqlite" in stores else []:
        print(f"  weft on SQLite, {workers} worker(s) ...", flush=True)
        url = f"sqlite:///{stack.tmp / f'load-{uuid.uuid4().hex[:8]}.db'}"
        outcomes.append(await weft_side(stack, conversations, url, "weft sqlite", workers))
    for workers in worker_counts if "postgresql" in stores and postgres_reachable() else []:
        with postgres_database() as url:
            print(f"  weft on PostgreSQL, {workers} worker(s) ...", flush=True)
            outcomes.append(await weft_side(stack, conversations, url, "weft postgresql", workers))
    report(conversations, outcomes)
    return outcomes


def report(conversations: int, outcomes: list[Outcome]) -> None:
    """One row per side; CPU as % of one core over the run, and ms per step."""
    floor = outcomes[0]
    print(
        f"  {'side':16}{'workers':>8}{'steps/s':>9}{'ratio':>8}{'wall s':>8}"
        f"  {'worker CPU % of a core (ms/step)':34}{'bench %':>8}{'server %':>9}{'pg %':>6}"
        f"{'machine %':>10}{'other %':>8}"
    )
    for o in outcomes:
        per_core = "+".join(f"{c / o.seconds * 100:.0f}" for c in o.worker_cpu)
        per_step = sum(o.worker_cpu) / o.steps * 1000
        server = f"{o.server_cpu / o.seconds * 100:.0f}" if o.server_cpu is not None else "?"
        print(
            f"  {o.side:16}{o.workers:>8}{o.rate:9.1f}{o.rate / floor.rate:7.2f}x{o.seconds:8.1f}"
            f"  {f'{per_core} ({per_step:.1f})':34}{o.bench_cpu / o.seconds * 100:8.0f}"
            f"{server:>9}{o.postgres_cpu / o.seconds * 100:6.0f}"
            f"{o.machine_busy / o.machine_total * 100:10.0f}{o.other_load() * 100:8.0f}"
        )
        for problem in o.problems[:3]:
            print(f"    PROBLEM: {problem}")
        a = o.attempts
        if a.started:
            print(f"    {a.eager / a.started:.0%} of {a.started} activity attempts started eagerly")
        if a.workflow_tasks:
            print(
                f"    {a.sticky_timeouts} of {a.workflow_tasks} workflow tasks timed out on the "
                "sticky queue (then taken with the full history)"
            )
        if a.retries:
            print(
                f"    {a.retries.total()} activity attempts were retries (all threads' "
                "histories); the most common, by what failed the attempt before:"
            )
            for cause, count in a.retries.most_common(3):
                print(f"      {count:5d}  {cause}")
    print(
        "  (% of a core: 100 = one core busy for the whole run; machine % and other % are of\n"
        "   all cores, other = busy with processes this benchmark did not start.\n"
        "   bench = this process: the scripted model server and the client; server = the\n"
        "   Temporal dev server; pg = every postgres process, whoever uses it.)"
    )


def verdict(results: dict[int, list[Outcome]]) -> None:
    """The target: one worker at >= 80% of the floor's steps/s at the largest N."""
    largest = max(results)
    outcomes = results[largest]
    floor = outcomes[0]
    print(
        f"\n== target: one weft worker >= {TARGET_SHARE:.0%} of the floor's steps/s at N={largest}"
    )
    if not any(o.workers == 1 for o in outcomes[1:]):
        print("  no one-worker run to judge (--workers has no 1)")
    for o in outcomes[1:]:
        if o.workers == 1:
            share = o.rate / floor.rate
            met = "met" if share >= TARGET_SHARE else "NOT met"
            print(f"  {o.side}: {share:.2f}x ({met})")


async def main(
    sizes: list[int],
    worker_counts: list[int],
    stores: list[str],
    eager: str,
    sticky_seconds: float | None,
) -> int:
    """Every N, every side; 1 when some conversation went wrong."""
    bench_definitions()  # fail fast on bad bench definitions
    results: dict[int, list[Outcome]] = {}
    # The scripted server keeps no requests: each holds its whole transcript, and in this
    # process they would grow the heap every garbage collection walks, for every side.
    async with local_stack(max_records=0) as (client, scripted, address):
        scripted.set_script(SCRIPT, add_script(CALLS))
        with tempfile.TemporaryDirectory() as tmp:
            stack = Stack(
                client,
                scripted,
                address,
                Path(tmp),
                temporal_server_pid(address),
                worker_settings(eager, sticky_seconds),
            )
            if stack.server_pid is None:
                print("note: the dev server's process was not found; its CPU is not shown")
            for conversations in sizes:
                results[conversations] = await compare(stack, conversations, worker_counts, stores)
    verdict(results)
    return 1 if any(o.problems for outcomes in results.values() for o in outcomes) else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--threads", default="50,200", help="conversations N, comma-separated")
    parser.add_argument(
        "--workers", default="1,2", help="weft worker processes per run, comma-separated"
    )
    parser.add_argument(
        "--stores",
        default="sqlite,postgresql",
        help="weft's stores, comma-separated (the floor always runs: it is the reference)",
    )
    add_eager_flag(parser)
    add_quick_tools_flag(parser)
    parser.add_argument(
        "--sticky-schedule-to-start",
        type=float,
        help="weft's workers' stickyScheduleToStartSeconds (default: weft's own)",
    )
    args = parser.parse_args()
    use_quick_tools(args.quick_tools)  # the worker subprocesses inherit it
    sizes = [int(n) for n in args.threads.split(",")]
    counts = [int(n) for n in args.workers.split(",")]
    stores = args.stores.split(",")
    unknown = set(stores) - {"sqlite", "postgresql"}
    if unknown:
        parser.error(f"unknown stores: {', '.join(sorted(unknown))}")
    raise SystemExit(
        asyncio.run(main(sizes, counts, stores, args.eager, args.sticky_schedule_to_start))
    )
