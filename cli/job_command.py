"""`weft job run|status|cancel|resume|results|delete`: jobs from the command line
(docs/jobs.md).

Under `weft --tenant T` every command keeps to T's jobs, and every control action is in
the audit log: both through `tenant_scope.py`."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TextIO, get_args

from weft.cli.delete_command import check_grace, common_options, confirmed, print_report
from weft.cli.tenant_scope import JOB, TenantScope, tenant_scope
from weft.cli.thread_guard import cli_subject
from weft.client.audit_trail import JOB_CANCEL, JOB_CREATE, JOB_RESUME
from weft.client.jobs import Jobs, parse_rate, read_items_file
from weft.contract.jobs import JobRecord, JobStatus, progress_line
from weft.contract.tenants import DEFAULT_TENANT
from weft.workers.config import WeftConfig

_STATUSES = list(get_args(JobStatus))


def register(commands: Any) -> None:
    """Add `weft job` and its actions to the `weft` subcommands."""
    job = commands.add_parser("job", help="a batch of items, each run as a task (docs/jobs.md)")
    actions = job.add_subparsers(dest="job_action", required=True)
    run = actions.add_parser("run", help="create a job from a JSONL file of items; prints its id")
    run.add_argument("assignee", help="the agent that runs every item")
    run.add_argument("--items", required=True, metavar="FILE.jsonl", help="one item a line")
    run.add_argument("--concurrency", type=int, default=4, help="items running at once")
    run.add_argument("--rate", metavar="KEY=LIMITS", help="pace item starts, e.g. openai=500rpm")
    run.add_argument("--max-attempts", type=int, default=1, help="attempts per item")
    run.add_argument("--deadline", type=float, help="seconds each item's task may run")
    run.add_argument("--schema", help="acceptance: a JSON Schema file every answer must meet")
    run.add_argument("--session", help="the session the items' tasks belong to")
    run.add_argument(
        "--thread", metavar="THREAD_ID", help="the thread the job belongs to (its summary lists it)"
    )
    run.add_argument("--items-per-run", type=int, help="items a run starts before continuing")
    run.add_argument("--wait", action="store_true", help="print progress until the job ends")
    run.add_argument(
        "--tenant",
        help="the tenant the job (and its items' tasks) belongs to (default: --thread's "
        "tenant, else default; docs/tenants.md)",
    )
    run.set_defaults(handler=_run)
    status = actions.add_parser("status", help="the job's status and counts")
    status.add_argument("job_id")
    status.add_argument(
        "--watch", action="store_true", help="a progress bar until the job ends (exit 0: completed)"
    )
    status.add_argument("--json", action="store_true", help="the job record as JSON")
    status.set_defaults(handler=_status)
    listing = actions.add_parser("list", help="jobs, most recently changed first")
    listing.add_argument("--status", choices=_STATUSES, action="append", metavar="STATUS")
    listing.add_argument("--limit", type=int, default=50)
    listing.set_defaults(handler=_list)
    cancel = actions.add_parser("cancel", help="stop a job; its running items are cancelled")
    cancel.add_argument("job_id")
    cancel.add_argument("--reason")
    cancel.set_defaults(handler=_cancel)
    resume = actions.add_parser("resume", help="run a cancelled or failed job's unfinished items")
    resume.add_argument("job_id")
    resume.add_argument("--reason")
    resume.set_defaults(handler=_resume)
    results = actions.add_parser("results", help="one JSON line per item: status and output")
    results.add_argument("job_id")
    results.set_defaults(handler=_results)
    delete = actions.add_parser(
        "delete",
        help="cancel a job if open and delete everything of it (items, tasks, Temporal)",
        description="Cancel the job if it is open, then delete each item's task (as `weft "
        "task delete` does), the job's items, its log and every Temporal run of it; with "
        "--with-threads, the threads its items' attempts ran too. Deleting again finishes "
        "a deletion a crash interrupted (docs/deletion.md).",
    )
    delete.add_argument("job_id")
    delete.add_argument(
        "--with-threads", action="store_true", help="the threads its items' attempts ran too"
    )
    common_options(delete, "an open job may take to end after its cancel")
    delete.set_defaults(handler=_delete)


@asynccontextmanager
async def _jobs(
    args: argparse.Namespace, config: WeftConfig
) -> AsyncIterator[tuple[Jobs, TenantScope]]:
    """The jobs, and the scope that keeps to the tenant the CLI acts for and records."""
    async with tenant_scope(args, config) as scope:
        yield Jobs(scope.client, scope.store, task_queue=config.temporal.task_queue), scope


async def _run(args: argparse.Namespace, config: WeftConfig) -> int:
    # Everything is checked before anything is stored or started.
    items = read_items_file(args.items)
    rate = parse_rate(args.rate) if args.rate else None
    schema = _schema(args.schema) if args.schema else None
    constraints: dict[str, Any] = {"maxAttempts": args.max_attempts}
    if args.deadline is not None:
        constraints["deadlineSeconds"] = args.deadline
    fields: dict[str, Any] = {"constraints": constraints}
    if args.session:
        fields["session_id"] = args.session
    if args.thread:
        fields["thread_id"] = args.thread
    if args.items_per_run is not None:
        fields["items_per_run"] = args.items_per_run
    if args.tenant is not None:
        fields["tenant"] = args.tenant
    async with _jobs(args, config) as (jobs, scope):
        # A job made for a thread is the thread's tenant's: the creation tells which.
        async with scope.creating(JOB_CREATE, args.tenant) as outcome:
            record = await jobs.create(
                args.assignee,
                items,
                concurrency=args.concurrency,
                rate=rate,
                acceptance_schema=schema,
                **fields,
            )
            outcome.tenant = record.tenant or DEFAULT_TENANT
        print(record.job_id, flush=True)
        if args.wait:
            return await _watch(jobs, record.job_id)
    return 0


async def _status(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(args, config) as (jobs, scope):
        await scope.owner(JOB, args.job_id)
        if args.watch:
            return await _watch(jobs, args.job_id)
        record = await jobs.show(args.job_id)
    if args.json:
        print(json.dumps(record.model_dump(mode="json"), indent=2))
    else:
        print(progress_line(record))
    return 0


BAR_WIDTH = 30
# The bar's cells, by where the items stand: done (completed), failed or cancelled,
# running, pending.
_CELLS = (("completed", "#"), ("ended", "x"), ("running", ">"), ("pending", "."))


def progress_bar(record: JobRecord, rate: float | None, width: int = BAR_WIDTH) -> str:
    """One line with a bar of the job's items by where they stand, the percentage done,
    the counts, the items ended per second since watching began (`rate`, None before it
    can be told) and the time left at that rate."""
    c = record.counts
    parts = {
        "completed": c.completed,
        "ended": c.failed + c.cancelled,
        "running": c.running,
        "pending": c.pending,
    }
    cells = _cells(parts, c.total, width)
    bar = "".join(mark * cells[name] for name, mark in _CELLS)
    percent = 100 * c.done // c.total if c.total else 100
    line = (
        f"{record.job_id} [{bar}] {percent:3d}% {c.done}/{c.total} done: "
        f"{c.completed} completed, {c.failed + c.cancelled} failed, "
        f"{c.running} running, {c.pending} pending"
    )
    line += _pace(record, rate)
    if record.terminal:
        line += f" · {record.status}"
        if record.reason:
            line += f" — {record.reason}"
    return line


def plain_progress(record: JobRecord, rate: float | None) -> str:
    """The progress line for a log or a pipe: `progress_line`, then the pace."""
    return progress_line(record) + _pace(record, rate)


def _pace(record: JobRecord, rate: float | None) -> str:
    """` · N items/s · ETA …` (the ETA while the job runs), or "" before a rate is known."""
    if rate is None:
        return ""
    pace = f" · {rate:.1f} items/s"
    left = record.counts.total - record.counts.done
    if not record.terminal and rate > 0 and left > 0:
        pace += f" · ETA {_duration(left / rate)}"
    return pace


def _cells(parts: dict[str, int], total: int, width: int) -> dict[str, int]:
    """`width` cells shared by `parts` in proportion (largest remainders), so the bar's
    length never changes as counts move."""
    if total <= 0:
        return {name: (width if name == "completed" else 0) for name in parts}
    exact = {name: n * width / total for name, n in parts.items()}
    cells = {name: int(value) for name, value in exact.items()}
    spare = width - sum(cells.values())
    for name in sorted(exact, key=lambda n: exact[n] - cells[n], reverse=True)[:spare]:
        cells[name] += 1
    return cells


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressView:
    """Draws a job's progress: on a terminal one bar redrawn in place (`\r`), elsewhere a
    plain line per change (a log or a pipe keeps every line, with no control codes)."""

    def __init__(self, out: TextIO, *, terminal: bool, clock: Callable[[], float]) -> None:
        self._out = out
        self._terminal = terminal
        self._clock = clock
        self._start: tuple[float, int] | None = None  # when watching began, and done then
        self._drawn = 0  # the length of the bar on screen, to blank what a shorter one leaves

    def show(self, record: JobRecord) -> None:
        now, done = self._clock(), record.counts.done
        if self._start is None:
            self._start = (now, done)
        began, done_then = self._start
        # The rate is told from what ended while watching, so a job watched halfway through
        # is not credited with its earlier items.
        rate = (done - done_then) / (now - began) if now > began and done > done_then else None
        if self._terminal:
            line = progress_bar(record, rate)
            pad = " " * max(0, self._drawn - len(line))
            self._out.write(f"\r{line}{pad}")
            self._drawn = len(line)
            if record.terminal:
                self._out.write("\n")
        else:
            self._out.write(plain_progress(record, rate) + "\n")
        self._out.flush()


async def _watch(jobs: Jobs, job_id: str, out: TextIO | None = None) -> int:
    """The job's progress until it ends; 0 when it completed, else 1."""
    out = out or sys.stdout
    view = ProgressView(out, terminal=out.isatty(), clock=time.monotonic)
    last: JobRecord | None = None
    async for record in jobs.watch(job_id):
        view.show(record)
        last = record
    return 0 if last is not None and last.status == "completed" else 1


async def _list(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(args, config) as (jobs, scope):
        records = await jobs.list_checked(
            statuses=args.status, tenant=scope.tenant, limit=args.limit
        )
    for record in records:
        print(progress_line(record))
    if not records:
        print("no jobs")
    return 0


async def _cancel(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(args, config) as (jobs, scope):
        async with scope.acting(JOB_CANCEL, JOB, args.job_id):
            await jobs.cancel(args.job_id, args.reason)
    print(f"cancel requested for {args.job_id}")
    return 0


async def _resume(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(args, config) as (jobs, scope):
        async with scope.acting(JOB_RESUME, JOB, args.job_id):
            await jobs.resume(args.job_id, args.reason)
    print(f"resuming {args.job_id}")
    return 0


async def _results(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(args, config) as (jobs, scope):
        await scope.owner(JOB, args.job_id)
        for line in jobs.results(args.job_id):
            sys.stdout.write(line + "\n")
    return 0


async def _delete(args: argparse.Namespace, config: WeftConfig) -> int:
    check_grace(args.grace)
    what = f"delete job {args.job_id!r}, its items and their tasks" + (
        " and threads" if args.with_threads else ""
    )
    if not confirmed(args, what):
        return 1
    async with _jobs(args, config) as (jobs, scope):
        await scope.owner(JOB, args.job_id)  # recorded by the deletion itself
        report = await jobs.delete(
            args.job_id, with_threads=args.with_threads, grace=args.grace, audit_as=cli_subject()
        )
    print_report(args, report)
    return 0


def _schema(path: str) -> dict[str, Any]:
    """The acceptance schema file as a JSON object; ValueError naming the file."""
    try:
        schema = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"--schema {path}: {err}") from None
    if not isinstance(schema, dict):
        raise ValueError(f"--schema {path}: a JSON Schema is an object")
    return schema
