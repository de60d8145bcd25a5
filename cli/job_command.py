"""`weft job run|status|cancel|resume|results`: jobs from the command line (docs/jobs.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, get_args

from weft.cli.temporal_client import client_from_config
from weft.client.jobs import Jobs, parse_rate, read_items_file
from weft.contract.jobs import JobRecord, JobStatus, progress_line
from weft.store import Store
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
    run.add_argument("--items-per-run", type=int, help="items a run starts before continuing")
    run.add_argument("--wait", action="store_true", help="print progress until the job ends")
    run.set_defaults(handler=_run)
    status = actions.add_parser("status", help="the job's status and counts")
    status.add_argument("job_id")
    status.add_argument("--watch", action="store_true", help="a progress line per change")
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


@asynccontextmanager
async def _jobs(config: WeftConfig) -> AsyncIterator[Jobs]:
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        yield Jobs(client, store, task_queue=config.temporal.task_queue)
    finally:
        store.close()


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
    if args.items_per_run is not None:
        fields["items_per_run"] = args.items_per_run
    async with _jobs(config) as jobs:
        record = await jobs.create(
            args.assignee,
            items,
            concurrency=args.concurrency,
            rate=rate,
            acceptance_schema=schema,
            **fields,
        )
        print(record.job_id, flush=True)
        if args.wait:
            return await _watch(jobs, record.job_id)
    return 0


async def _status(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(config) as jobs:
        if args.watch:
            return await _watch(jobs, args.job_id)
        record = jobs.get(args.job_id)
    if args.json:
        print(json.dumps(record.model_dump(mode="json"), indent=2))
    else:
        print(progress_line(record))
    return 0


async def _watch(jobs: Jobs, job_id: str) -> int:
    """A progress line each time the job changes; 0 when it completed, else 1."""
    last: JobRecord | None = None
    async for record in jobs.watch(job_id):
        print(progress_line(record), flush=True)
        last = record
    return 0 if last is not None and last.status == "completed" else 1


async def _list(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(config) as jobs:
        records = jobs.list(statuses=args.status, limit=args.limit)
    for record in records:
        print(progress_line(record))
    if not records:
        print("no jobs")
    return 0


async def _cancel(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(config) as jobs:
        await jobs.cancel(args.job_id, args.reason)
    print(f"cancel requested for {args.job_id}")
    return 0


async def _resume(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(config) as jobs:
        await jobs.resume(args.job_id, args.reason)
    print(f"resuming {args.job_id}")
    return 0


async def _results(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _jobs(config) as jobs:
        for line in jobs.results(args.job_id):
            sys.stdout.write(line + "\n")
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
