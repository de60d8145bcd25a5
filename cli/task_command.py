"""`weft task create|get|list|cancel|retry`: tasks from the command line (docs/tasks.md)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, get_args

from weft.cli.temporal_client import client_from_config
from weft.client.tasks import Tasks
from weft.contract.tasks import TaskRecord, TaskStatus
from weft.store import Store
from weft.workers.config import WeftConfig

_STATUSES = list(get_args(TaskStatus))


def register(commands: Any) -> None:
    """Add `weft task` and its actions to the `weft` subcommands."""
    task = commands.add_parser("task", help="units of work run by an agent (docs/tasks.md)")
    actions = task.add_subparsers(dest="task_action", required=True)
    create = actions.add_parser("create", help="create a task and start it; prints its id")
    create.add_argument("assignee", help="the agent that runs it")
    create.add_argument("objective", help="what to do: the first message of each attempt")
    create.add_argument("--max-attempts", type=int, default=1, help="attempts before failing")
    create.add_argument("--deadline", type=float, help="seconds until it times out")
    create.add_argument("--depends-on", action="append", default=[], metavar="TASK_ID")
    create.add_argument("--schema", help="acceptance: a JSON Schema file the answer must meet")
    create.add_argument("--session", help="the session the task belongs to")
    create.add_argument("--wait", action="store_true", help="wait for the run to end; print it")
    create.set_defaults(handler=_create)
    get = actions.add_parser("get", help="print one task as JSON")
    get.add_argument("task_id")
    get.set_defaults(handler=_get)
    listing = actions.add_parser("list", help="list tasks, most recently changed first")
    listing.add_argument("--status", choices=_STATUSES, action="append", metavar="STATUS")
    listing.add_argument("--limit", type=int, default=50)
    listing.add_argument("--json", action="store_true", help="the task_snapshot as JSON")
    listing.set_defaults(handler=_list)
    cancel = actions.add_parser("cancel", help="stop a task; its running attempt's thread ends")
    cancel.add_argument("task_id")
    cancel.add_argument("--reason")
    cancel.set_defaults(handler=_cancel)
    retry = actions.add_parser("retry", help="run a failed, timed out or cancelled task again")
    retry.add_argument("task_id")
    retry.add_argument("--reason")
    retry.set_defaults(handler=_retry)


@asynccontextmanager
async def _tasks(config: WeftConfig) -> AsyncIterator[Tasks]:
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        yield Tasks(client, store, task_queue=config.temporal.task_queue)
    finally:
        store.close()


async def _create(args: argparse.Namespace, config: WeftConfig) -> int:
    schema = _schema(args.schema) if args.schema else None
    constraints: dict[str, Any] = {"maxAttempts": args.max_attempts}
    if args.deadline is not None:
        constraints["deadlineSeconds"] = args.deadline
    async with _tasks(config) as tasks:
        record = await tasks.create(
            args.objective,
            args.assignee,
            dependencies=args.depends_on,
            acceptance_schema=schema,
            constraints=constraints,
            scope={"sessionId": args.session} if args.session else {},
        )
        if args.wait:
            _print(await tasks.wait(record.task_id))
        else:
            print(record.task_id)
    return 0


async def _get(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(config) as tasks:
        _print(tasks.get(args.task_id))
    return 0


async def _list(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(config) as tasks:
        if args.json:
            snapshot = tasks.snapshot(limit=args.limit)
            print(json.dumps(snapshot.model_dump(mode="json"), indent=2))
            return 0
        records = tasks.list(statuses=args.status, limit=args.limit)
    for record in records:
        print(
            f"{record.task_id}\t{record.status}\t{record.assignee}\t{len(record.attempts)}\t{record.objective[:60]}"
        )
    if not records:
        print("no tasks")
    return 0


async def _cancel(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(config) as tasks:
        await tasks.cancel(args.task_id, args.reason)
    print(f"cancel requested for {args.task_id}")
    return 0


async def _retry(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(config) as tasks:
        await tasks.retry(args.task_id, args.reason)
    print(f"retrying {args.task_id}")
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


def _print(record: TaskRecord) -> None:
    print(json.dumps(record.model_dump(mode="json"), indent=2))
