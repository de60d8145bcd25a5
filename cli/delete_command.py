"""`weft thread delete ID` and `weft tenant delete T`: terminate and delete everything of a
thread, or of every thread of a tenant, in Temporal and the store (docs/deletion.md). The
CLI acts as the operator; each deletion is recorded in the audit log as `cli:<os user>`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from typing import Any

from weft.activities.tenant_deletion import delete_tenant
from weft.activities.thread_deletion import (
    DEFAULT_GRACE_SECONDS,
    DeletionReport,
    ThreadNotFound,
    check_thread_id,
    delete_thread,
)
from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import cli_subject
from weft.client.schedules import ScheduleNotFound, Schedules
from weft.contract.tenants import check_tenant
from weft.store import Store
from weft.workers.config import WeftConfig


def register(thread_actions: Any) -> None:
    """Add `delete` to the `weft thread` actions."""
    delete = thread_actions.add_parser(
        "delete",
        help="terminate a thread and delete everything of it (store, blobs, Temporal)",
        description="Terminate the thread if it runs, then delete its messages, events, "
        "files, values, effects, budget ledger, idempotency records and links from the "
        "store, the blobs no other thread refers to, and every Temporal execution of it. "
        "Deleting again finishes a deletion a crash interrupted.",
    )
    # Not `thread_id`: the one-thread guard would refuse a thread Temporal no longer knows.
    delete.add_argument("target", metavar="THREAD_ID", help="the thread to delete")
    _common(delete)
    delete.add_argument("--children", action="store_true", help="its subagents too, recursively")
    delete.set_defaults(handler=delete_thread_command)


def register_tenant(subparsers: Any) -> None:
    """Add `tenant delete` to the main `weft` CLI's subparsers."""
    tenant = subparsers.add_parser("tenant", help="tenants of `weft serve`: delete")
    actions = tenant.add_subparsers(dest="action", required=True)
    delete = actions.add_parser(
        "delete",
        help="delete every job, task and thread of a tenant, and its API keys",
        description="Cancel the tenant's open jobs and tasks, delete each job (its items' "
        "tasks with it) and task, every thread of the tenant (as `weft thread delete "
        "--children` does), then its API keys, quota and retention policy. The audit log "
        "keeps its entries.",
    )
    delete.add_argument("tenant", help="the tenant to delete")
    _common(delete)
    delete.set_defaults(handler=delete_tenant_command)


def _common(parser: argparse.ArgumentParser) -> None:
    common_options(parser, "a running thread may take to close after the terminate signal")


def common_options(parser: argparse.ArgumentParser, grace_of: str) -> None:
    """`--yes`, `--grace` (how long `grace_of`) and `--json`: every deletion's options."""
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE_SECONDS,
        metavar="S",
        help=f"how long {grace_of} before it is terminated outright "
        f"(default {DEFAULT_GRACE_SECONDS:g})",
    )
    parser.add_argument("--json", action="store_true", help="print what was deleted as JSON")


async def delete_thread_command(args: argparse.Namespace, config: WeftConfig) -> int:
    thread_id = check_thread_id(args.target)
    check_grace(args.grace)
    if not confirmed(
        args, f"delete thread {thread_id!r}" + (" and its children" if args.children else "")
    ):
        return 1
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    with store:
        try:
            report = await delete_thread(
                client,
                store,
                thread_id,
                children=args.children,
                grace=args.grace,
                audit_subject=cli_subject(),
            )
        except ThreadNotFound as err:
            print(f"weft: {err}", file=sys.stderr)
            return 1
    print_report(args, report)
    return 0


async def delete_tenant_command(args: argparse.Namespace, config: WeftConfig) -> int:
    tenant = check_tenant(args.tenant)
    check_grace(args.grace)
    if not confirmed(
        args, f"delete every schedule, job, task, thread and API key of tenant {tenant!r}"
    ):
        return 1
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    # Its schedules first, so none starts a thread of the tenant while it is deleted.
    schedules = Schedules(client, task_queue=config.temporal.task_queue)
    doomed = [s.name for s in await schedules.list(tenant=tenant)]
    for name in doomed:
        with contextlib.suppress(ScheduleNotFound):  # deleted meanwhile: gone all the same
            await schedules.delete(name)
    with store:
        report = await delete_tenant(
            client, store, tenant, grace=args.grace, audit_subject=cli_subject()
        )
    report.schedules = doomed
    print_report(args, report)
    return 0


def check_grace(grace: float) -> None:
    """`--grace` must be a number of seconds, 0 or more: ValueError naming it."""
    if not grace >= 0:
        raise ValueError(f"--grace {grace}: a number of seconds, 0 or more")


def confirmed(args: argparse.Namespace, what: str) -> bool:
    """Whether to go on: `--yes`, or a `y` typed at a terminal; without a terminal, no."""
    if args.yes:
        return True
    if not sys.stdin.isatty():
        print(f"weft: {what}: cannot be undone; pass --yes to confirm", file=sys.stderr)
        return False
    answer = input(f"{what}? This cannot be undone. [y/N] ")
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("weft: nothing deleted", file=sys.stderr)
    return False


def print_report(args: argparse.Namespace, report: DeletionReport) -> None:
    """The report as JSON (`--json`), or a line per job, task and thread deleted."""
    if args.json:
        print(json.dumps(report.wire(), indent=2))
        return
    for name in report.schedules:
        print(f"deleted schedule {name}")
    for job in report.jobs:
        print(
            f"deleted job {job.job_id}: {sum(job.rows.values())} rows, "
            f"{job.executions} Temporal executions"
        )
    for task in report.tasks:
        unlinked = f"; its edge removed from {', '.join(task.unlinked)}" if task.unlinked else ""
        print(
            f"deleted task {task.task_id}: {sum(task.rows.values())} rows, "
            f"{task.executions} Temporal executions{unlinked}"
        )
    for thread in report.threads:
        rows = sum(thread.rows.values())
        print(
            f"deleted {thread.thread_id}: {rows} rows, {thread.blobs} blobs, "
            f"{thread.executions} Temporal executions"
        )
    if not report.threads and not report.tasks and not report.jobs:
        print("no threads to delete")
    if report.api_keys:
        print(f"deleted {report.api_keys} API keys")


__all__ = [
    "check_grace",
    "common_options",
    "confirmed",
    "delete_tenant_command",
    "delete_thread_command",
    "print_report",
    "register",
    "register_tenant",
]
