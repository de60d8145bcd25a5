"""`weft task create|get|wait|list|start|update|delegate|link|unlink|pause|resume|complete|
fail|progress|cancel|retry|delete`: tasks from the command line (docs/tasks.md).

`get`, `wait` and `list` ask Temporal whether an open task's run closed without writing
its end (terminated through Temporal), and record that end first.

Under `weft --tenant T` every command keeps to T's tasks, and every control action is in
the audit log: both through `tenant_scope.py`."""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, get_args

from weft.cli.delete_command import check_grace, common_options, confirmed, print_report
from weft.cli.tenant_scope import TASK, TenantScope, tenant_scope
from weft.cli.thread_guard import cli_subject
from weft.client.audit_trail import TASK_COMMANDS, TASK_CREATE
from weft.client.tasks import Tasks
from weft.contract.tasks import TaskRecord, TaskStatus, task_snapshot
from weft.contract.tenants import DEFAULT_TENANT
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
    create.add_argument(
        "--in-thread",
        metavar="THREAD_ID",
        help="run each attempt as a turn of this running thread of the assignee agent",
    )
    create.add_argument(
        "--no-start", action="store_true", help="create it held: it waits for `weft task start`"
    )
    create.add_argument(
        "--lost-after", type=float, help="seconds without a heartbeat before an attempt is lost"
    )
    create.add_argument("--wait", action="store_true", help="wait for the run to end; print it")
    create.add_argument(
        "--tenant", help="the tenant the task belongs to (default: default; docs/tenants.md)"
    )
    create.set_defaults(handler=_create)
    get = actions.add_parser("get", help="print one task as JSON")
    get.add_argument("task_id")
    get.set_defaults(handler=_get)
    wait = actions.add_parser("wait", help="wait for a task's run to end; print the task")
    wait.add_argument("task_id")
    wait.set_defaults(handler=_wait)
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
    for name, help_ in (
        ("start", "start a task created with --no-start"),
        ("pause", "pause a task: no new attempt starts; a running one runs to its end"),
        ("resume", "resume a paused task"),
        ("fail", "fail an unfinished task (recorded with --by and --reason)"),
    ):
        _decision(actions.add_parser(name, help=help_), name)
    update = _decision(
        actions.add_parser("update", help="change a task before its attempts start"), "update"
    )
    update.add_argument("--objective")
    update.add_argument("--max-attempts", type=int)
    update.add_argument("--deadline", type=float, help="seconds from the run's start")
    update.add_argument("--schema", help="a JSON Schema file: the new acceptance")
    update.add_argument("--no-schema", action="store_true", help="drop the acceptance schema")
    delegate = _decision(
        actions.add_parser("delegate", help="hand a task to another agent before it runs"),
        "delegate",
    )
    delegate.add_argument("agent", help="the agent that runs its attempts from now on")
    delegate.add_argument("--start", action="store_true", help="also start a held task")
    for name, help_ in (
        ("link", "make the task depend on another (a cycle is refused)"),
        ("unlink", "remove a dependency of the task"),
    ):
        edge = _decision(actions.add_parser(name, help=help_), name)
        edge.add_argument("depends_on", metavar="DEPENDS_ON", help="the task it depends on")
    complete = _decision(
        actions.add_parser("complete", help="complete a task with an operator's output"),
        "complete",
    )
    complete.add_argument("--response", help="the output's text")
    complete.add_argument("--structured", help="the output as JSON (checked against the schema)")
    progress = actions.add_parser("progress", help="add a progress entry to a task")
    progress.add_argument("task_id")
    progress.add_argument("message")
    progress.add_argument("--data", help="a JSON object")
    progress.set_defaults(handler=_progress)
    delete = actions.add_parser(
        "delete",
        help="cancel a task if open and delete everything of it (store, Temporal)",
        description="Cancel the task if it is open, then delete its row, its log (attempts, "
        "progress, output) and every Temporal run of it; with --with-threads, the threads "
        "its attempts ran too. A task others depend on needs --force: their edges to it are "
        "removed, recorded in their logs. A job's item's task goes with its job (weft job "
        "delete). Deleting again finishes a deletion a crash interrupted (docs/deletion.md).",
    )
    delete.add_argument("task_id")
    delete.add_argument(
        "--force", action="store_true", help="delete it even if other tasks depend on it"
    )
    delete.add_argument(
        "--with-threads", action="store_true", help="the threads its attempts ran too"
    )
    common_options(delete, "an open task may take to end after its cancel")
    delete.set_defaults(handler=_delete)


def _decision(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    """A command on one task, with who asks and why (recorded in the task's log)."""
    parser.add_argument("task_id")
    parser.add_argument("--by", help="who asks (default: operator)")
    parser.add_argument("--reason")
    parser.set_defaults(handler=_decide, task_command=command)
    return parser


@asynccontextmanager
async def _tasks(
    args: argparse.Namespace, config: WeftConfig
) -> AsyncIterator[tuple[Tasks, TenantScope]]:
    """The tasks, and the scope that keeps to the tenant the CLI acts for and records."""
    async with tenant_scope(args, config) as scope:
        yield Tasks(scope.client, scope.store, task_queue=config.temporal.task_queue), scope


async def _create(args: argparse.Namespace, config: WeftConfig) -> int:
    schema = _schema(args.schema) if args.schema else None
    constraints: dict[str, Any] = {"maxAttempts": args.max_attempts}
    if args.deadline is not None:
        constraints["deadlineSeconds"] = args.deadline
    if args.lost_after is not None:
        constraints["lostAfterSeconds"] = args.lost_after
    async with _tasks(args, config) as (tasks, scope):
        async with scope.creating(TASK_CREATE, args.tenant or DEFAULT_TENANT):
            await scope.own_tasks("dependencies", args.depends_on)
            record = await tasks.create(
                args.objective,
                args.assignee,
                dependencies=args.depends_on,
                acceptance_schema=schema,
                constraints=constraints,
                scope={"sessionId": args.session} if args.session else {},
                auto_start=not args.no_start,
                tenant=args.tenant,
                in_thread=args.in_thread,
            )
        if args.wait:
            _print(await tasks.wait(record.task_id))
        else:
            print(record.task_id)
    return 0


async def _get(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(args, config) as (tasks, scope):
        await scope.owner(TASK, args.task_id)
        _print(await tasks.show(args.task_id))
    return 0


async def _wait(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(args, config) as (tasks, scope):
        await scope.owner(TASK, args.task_id)
        _print(await tasks.wait(args.task_id))
    return 0


async def _list(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(args, config) as (tasks, scope):
        if args.json:
            listed = await tasks.list_checked(tenant=scope.tenant, limit=args.limit)
            print(json.dumps(task_snapshot(listed).model_dump(mode="json"), indent=2))
            return 0
        records = await tasks.list_checked(
            statuses=args.status, tenant=scope.tenant, limit=args.limit
        )
    for record in records:
        print(
            f"{record.task_id}\t{record.status}\t{record.assignee}\t{len(record.attempts)}\t{record.objective[:60]}"
        )
    if not records:
        print("no tasks")
    return 0


async def _cancel(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(args, config) as (tasks, scope):
        async with scope.acting(TASK_COMMANDS["cancel"], TASK, args.task_id):
            await tasks.cancel(args.task_id, args.reason)
    print(f"cancel requested for {args.task_id}")
    return 0


async def _retry(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _tasks(args, config) as (tasks, scope):
        async with scope.acting(TASK_COMMANDS["retry"], TASK, args.task_id):
            await tasks.retry(args.task_id, args.reason)
    print(f"retrying {args.task_id}")
    return 0


async def _decide(args: argparse.Namespace, config: WeftConfig) -> int:
    """Run one task command; print the task as it then is."""
    who = {"by": args.by, "reason": args.reason}
    task_id, command = args.task_id, args.task_command
    async with (
        _tasks(args, config) as (tasks, scope),
        scope.acting(TASK_COMMANDS[command], TASK, task_id),
    ):
        if command == "update":
            record = await tasks.update(task_id, **_changes(args, tasks.get(task_id)), **who)
        elif command == "delegate":
            record = await tasks.delegate(task_id, args.agent, start=args.start, **who)
        elif command in ("link", "unlink"):
            if command == "link":
                await scope.own_tasks("dependsOn", [args.depends_on])
            record = await getattr(tasks, command)(task_id, args.depends_on, **who)
        elif command == "complete":
            structured = _json("--structured", args.structured) if args.structured else None
            record = await tasks.complete(
                task_id, response=args.response, structured=structured, **who
            )
        else:
            record = await getattr(tasks, command)(task_id, **who)
    _print(record)
    return 0


def _changes(args: argparse.Namespace, record: TaskRecord) -> dict[str, Any]:
    """`update`'s changes: the constraints given, over the task's own."""
    changes: dict[str, Any] = {"objective": args.objective}
    limits = {"maxAttempts": args.max_attempts, "deadlineSeconds": args.deadline}
    if any(v is not None for v in limits.values()):
        current = record.constraints.model_dump(mode="json", by_alias=True)
        changes["constraints"] = current | {k: v for k, v in limits.items() if v is not None}
    if args.schema or args.no_schema:
        changes["acceptance"] = {"schema": None if args.no_schema else _schema(args.schema)}
    return changes


async def _progress(args: argparse.Namespace, config: WeftConfig) -> int:
    data = _json("--data", args.data) if args.data else None
    if data is not None and not isinstance(data, dict):
        raise ValueError("--data: a JSON object")
    async with (
        _tasks(args, config) as (tasks, scope),
        scope.acting(TASK_COMMANDS["progress"], TASK, args.task_id),
    ):
        await tasks.append_progress(args.task_id, args.message, data)
    print(f"progress added to {args.task_id}")
    return 0


async def _delete(args: argparse.Namespace, config: WeftConfig) -> int:
    check_grace(args.grace)
    what = f"delete task {args.task_id!r}" + (" and its threads" if args.with_threads else "")
    if not confirmed(args, what):
        return 1
    async with _tasks(args, config) as (tasks, scope):
        await scope.owner(TASK, args.task_id)  # recorded by the deletion itself
        report = await tasks.delete(
            args.task_id,
            force=args.force,
            with_threads=args.with_threads,
            grace=args.grace,
            audit_as=cli_subject(),
        )
    print_report(args, report)
    return 0


def _json(option: str, text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as err:
        raise ValueError(f"{option}: not JSON ({err})") from None


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
