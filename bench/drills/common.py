"""Shared pieces of the fault drills: reports, worker configs, store watching, checks."""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import func, select
from support import local_stack, read
from temporalio.api.enums.v1 import EventType, TimeoutType
from temporalio.client import Client, WorkflowHandle

from weft.store import Store
from weft.store.tables import events as events_table

DEFINITIONS = Path(__file__).parent / "definitions"
FINAL_TEXT = "All the notes are stored."
ADMIN_URL = os.environ.get("WEFT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@dataclass
class Report:
    """What one drill measured (figures) and whether its invariants held (checks)."""

    name: str
    figures: list[tuple[str, str]] = field(default_factory=list)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    def figure(self, label: str, value: str) -> None:
        """Record and print a measured figure."""
        self.figures.append((label, value))
        print(f"  {label}: {value}", flush=True)

    def check(self, label: str, ok: bool, detail: str = "") -> bool:
        """Record and print an invariant as PASS or FAIL (with what went wrong)."""
        self.checks.append((label, ok, detail))
        suffix = f" ({detail})" if detail else ""
        print(f"  {'PASS' if ok else 'FAIL'} {label}{suffix}", flush=True)
        return ok

    @property
    def ok(self) -> bool:
        """True when the drill recorded checks and every one passed."""
        return bool(self.checks) and all(ok for _, ok, _ in self.checks)


def note(text: str) -> None:
    """A progress line, so a long drill shows where it is."""
    print(f"  .. {text}", flush=True)


def write_worker_config(
    folder: Path, *, address: str, task_queue: str, store_url: str, model_url: str
) -> Path:
    """A `weft worker` config on the drill definitions, whose `scripted` provider is the
    bench process's scripted model server (so every worker plays the same scripts)."""
    config = {
        "temporal": {"address": address, "taskQueue": task_queue},
        "store": {"url": store_url},
        "definitions": str(DEFINITIONS),
        "codec": {"keysFile": str(folder / "no-codec-keys")},
        "providers": {"scripted": {"kind": "openai", "baseUrl": model_url, "apiKey": "drill"}},
    }
    path = folder / f"worker-{uuid.uuid4().hex[:6]}.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class DrillStack:
    """What a drill on a local stack runs against."""

    client: Client
    queue: str
    config_file: Path
    store: Store


@asynccontextmanager
async def drill_stack(drill: str, script: dict[str, Any]) -> AsyncIterator[DrillStack]:
    """A dev server, the scripted model with `script` named "drill", a SQLite store in a
    temporary directory, and a worker config file for all three on a fresh task queue."""
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        url = f"sqlite:///{tmp / 'weft.db'}"
        async with local_stack() as (client, scripted, address):
            scripted.set_script("drill", script)
            queue = task_queue(drill)
            config_file = write_worker_config(
                tmp,
                address=address,
                task_queue=queue,
                store_url=url,
                model_url=scripted.openai_base_url,
            )
            store = await asyncio.to_thread(Store.open, url)
            try:
                yield DrillStack(client, queue, config_file, store)
            finally:
                store.close()


def task_queue(drill: str) -> str:
    """A fresh task queue for one drill run."""
    return f"drill-{drill}-{uuid.uuid4().hex[:8]}"


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database (its URL) at ADMIN_URL, dropped afterwards."""
    import psycopg
    from sqlalchemy import make_url

    name = f"weft_drill_{uuid.uuid4().hex[:12]}"
    try:
        admin = psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        raise RuntimeError(
            f"PostgreSQL is unreachable at {ADMIN_URL} (WEFT_TEST_POSTGRES_URL overrides): {error}"
        ) from None
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
        finally:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')


def event_counts(store: Store, event_type: str) -> Counter[str]:
    """How many events of `event_type` each thread has, in one query."""
    query = (
        select(events_table.c.thread_id, func.count())
        .where(events_table.c.type == event_type)
        .group_by(events_table.c.thread_id)
    )
    with store.engine.connect() as connection:
        return Counter({row[0]: int(row[1]) for row in connection.execute(query)})


async def wait_for_events(
    store: Store,
    thread_ids: Iterable[str],
    event_type: str,
    *,
    count: int = 1,
    threads: int | None = None,
    timeout: float = 300,
    interval: float = 0.2,
) -> float:
    """Wait until `threads` (default: all) of the threads have `count` events of `event_type`
    in the store; returns the seconds waited, or raises TimeoutError naming the stragglers."""
    wanted = set(thread_ids)
    needed = len(wanted) if threads is None else threads
    began = time.perf_counter()
    while True:
        counts = await asyncio.to_thread(event_counts, store, event_type)
        done = {t for t in wanted if counts[t] >= count}
        if len(done) >= needed:
            return time.perf_counter() - began
        if time.perf_counter() - began > timeout:
            missing = sorted(wanted - done)
            raise TimeoutError(
                f"{len(done)}/{needed} threads reached {count} {event_type} within {timeout:.0f} s"
                f"; e.g. {missing[:3]}"
            )
        await asyncio.sleep(interval)


async def history_facts(
    client: Client, thread_ids: Iterable[str]
) -> tuple[Counter[str], Counter[str]]:
    """From Temporal history: activities that needed more than one attempt, by activity type
    (ActivityTaskStarted carries the attempt that finally ran), and workflow tasks that timed
    out, by timeout type (a sticky queue nobody polls times out SCHEDULE_TO_START)."""
    retried: Counter[str] = Counter()
    timeouts: Counter[str] = Counter()
    for thread_id in thread_ids:
        history = await client.get_workflow_handle(thread_id).fetch_history()
        types: dict[int, str] = {}
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                attributes = event.activity_task_scheduled_event_attributes
                types[event.event_id] = attributes.activity_type.name
            elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
                started = event.activity_task_started_event_attributes
                if started.attempt > 1:
                    retried[types.get(started.scheduled_event_id, "?")] += 1
            elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
                kind = event.workflow_task_timed_out_event_attributes.timeout_type
                timeouts[TimeoutType.Name(kind).removeprefix("TIMEOUT_TYPE_")] += 1
    return retried, timeouts


def render_counts(counts: Counter[str]) -> str:
    """`total: a 1, b 2` for a Counter."""
    detail = ", ".join(f"{name} {count}" for name, count in sorted(counts.items()))
    return f"{sum(counts.values())}" + (f": {detail}" if detail else "")


async def report_history(report: Report, client: Client, thread_ids: Iterable[str]) -> int:
    """Print the retry and workflow-task timeout facts of history; returns the retries."""
    retried, timeouts = await history_facts(client, thread_ids)
    report.figure("activities retried (history, attempt > 1)", render_counts(retried))
    report.figure("workflow tasks timed out (history)", render_counts(timeouts))
    return sum(retried.values())


def longest_pauses(store: Store, thread_ids: Iterable[str]) -> list[float]:
    """Per thread, the longest gap in seconds between two consecutive events."""
    pauses = []
    for thread_id in thread_ids:
        stamps = [
            datetime.fromisoformat(e.timestamp) for e in store.events.read(thread_id, limit=100_000)
        ]
        gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)]
        pauses.append(max(gaps, default=0.0))
    return pauses


def attempts_after_first(store: Store, thread_ids: Iterable[str], event_type: str) -> int:
    """How many `event_type` events (model.requested, tool.started) are of a retry attempt."""
    return sum(
        1
        for thread_id in thread_ids
        for event in store.events.read(thread_id, types=[event_type], limit=10_000)
        if event.payload.get("attempt", 1) > 1
    )


def transcript_problems(
    store: Store, thread_id: str, roles: list[str], contents: dict[int, str]
) -> list[str]:
    """What is wrong with a thread's stored messages: lost or duplicated messages (ids,
    positions), roles out of order, or a message at index i not reading `contents[i]`."""
    stored = store.messages.list(thread_id)
    problems = []
    if len({m.id for m in stored}) != len(stored):
        problems.append("duplicate message ids")
    positions = [m.position for m in stored]
    if len(set(positions)) != len(positions) or positions != sorted(positions):
        problems.append(f"positions not unique and increasing: {positions}")
    if [m.role for m in stored] != roles:
        problems.append(f"roles {[m.role for m in stored]} != {roles}")
    for index, text in contents.items():
        if index < len(stored) and stored[index].content != text:
            problems.append(f"message {index} is {stored[index].content!r}, not {text!r}")
    return [f"{thread_id}: {p}" for p in problems]


def sequence_problems(store: Store, thread_id: str) -> list[str]:
    """A thread's event sequence must be 1..n with no gap or repeat."""
    query = select(
        func.count(),
        func.count(func.distinct(events_table.c.sequence)),
        func.max(events_table.c.sequence),
    ).where(events_table.c.thread_id == thread_id)
    with store.engine.connect() as connection:
        total, distinct, highest = connection.execute(query).one()
    if total == distinct == (highest or 0):
        return []
    return [f"{thread_id}: {total} events, {distinct} distinct sequences, max {highest}"]


def slow_script(steps: int, *, tool_seconds: float, chunk_delay_ms: int) -> dict[str, Any]:
    """`steps` model calls streamed slowly: `steps - 1` slow_note tool calls, then FINAL_TEXT."""
    pace = {"chunk_size": 4, "chunk_delay_ms": chunk_delay_ms}
    call = {"name": "slow_note", "arguments": {"text": "drill", "seconds": tool_seconds}}
    replies: list[dict[str, Any]] = [{"tool_calls": [call], "repeat": steps - 1, **pace}]
    if steps == 1:
        replies = []
    return {"replies": [*replies, {"text": FINAL_TEXT, **pace}]}


def slow_roles(steps: int) -> list[str]:
    """The stored roles of a thread that ran slow_script(steps) once."""
    return ["user", *["assistant", "tool"] * (steps - 1), "assistant"]


async def check_all_complete(
    report: Report, store: Store, thread_ids: list[str], *, turns: int = 1, timeout: float = 900
) -> None:
    """Wait until every thread has completed `turns` turns (turn.completed in the store)."""
    try:
        await wait_for_events(
            store, thread_ids, "turn.completed", count=turns, timeout=timeout, interval=0.5
        )
        report.check("every thread completes", True, f"{len(thread_ids)}/{len(thread_ids)}")
    except TimeoutError as error:
        report.check("every thread completes", False, str(error))


async def check_slow_threads(
    report: Report, store: Store, handles: list[WorkflowHandle[Any, Any]], steps: int
) -> None:
    """The invariants of threads that ran slow_script(steps): each is idle with the final
    answer, its messages are all there once in order, and its event sequence has no gap."""
    states = await asyncio.gather(*(read(h) for h in handles))
    wrong = [
        f"{h.id}: {s.status} {s.last_outcome!r}"
        for h, s in zip(handles, states, strict=True)
        if s.status != "waiting_input" or s.last_outcome != FINAL_TEXT
    ]
    report.check("every thread answers the final text", not wrong, first(wrong))
    ids = [h.id for h in handles]
    roles = slow_roles(steps)
    problems = await asyncio.to_thread(
        lambda: [
            p
            for t in ids
            for p in transcript_problems(store, t, roles, {len(roles) - 1: FINAL_TEXT})
        ]
    )
    report.check(
        "no message lost or duplicated (ids, positions, roles)", not problems, first(problems)
    )
    gaps = await asyncio.to_thread(lambda: [p for t in ids for p in sequence_problems(store, t)])
    report.check("event sequences are gapless per thread", not gaps, first(gaps))


def summary(values: list[float], unit: str = "ms", scale: float = 1000) -> str:
    """p50 / p95 / max of `values` (seconds), in `unit`."""
    if not values:
        return "no samples"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    digits = 0 if scale >= 1000 else 1

    def show(value: float) -> str:
        return f"{value * scale:.{digits}f} {unit}"

    return (
        f"p50 {show(statistics.median(ordered))}, p95 {show(p95)}, "
        f"max {show(ordered[-1])} (n={len(ordered)})"
    )


def first(problems: list[str], limit: int = 3) -> str:
    """A short rendering of a problem list for a FAIL line."""
    return "; ".join(problems[:limit]) + (
        f" (+{len(problems) - limit} more)" if len(problems) > limit else ""
    )


async def start_slow_threads(
    client: Any, queue: str, threads: int, steps: int, label: str
) -> list[Any]:
    """Start `threads` drill threads of `steps` slow steps each, all at once."""
    from support import start_thread

    return list(
        await asyncio.gather(
            *(
                start_thread(
                    client,
                    queue,
                    agent="drill_agent",
                    options={"heartbeatTimeoutSeconds": 5, "maxTotalSteps": steps + 2},
                    messages=[{"role": "user", "content": f"{label} drill thread {i}"}],
                )
                for i in range(threads)
            )
        )
    )
