"""`weft retention …`: closed threads deleted once past their TTL, by a Temporal Schedule
(docs/deletion.md, "Retention")."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import datetime
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import audit_trail
from weft.client import audit_trail as audit
from weft.client.retention import DEFAULT_EVERY, Retention, RetentionRun, RetentionStatus
from weft.contract.definitions import AgentDef
from weft.contract.retention import RetentionSweepResult, parse_ttl
from weft.contract.tenants import check_tenant
from weft.definitions import DefinitionError, load_directory
from weft.store import Store
from weft.workers.config import WeftConfig


def register(commands: Any) -> None:
    """Add `weft retention` and its actions to the `weft` subcommands."""
    retention = commands.add_parser(
        "retention",
        help="delete closed threads past their TTL, on a schedule (docs/deletion.md)",
    )
    actions = retention.add_subparsers(dest="retention_action", required=True)
    enable = actions.add_parser(
        "enable", help="create (or update) the weft-retention schedule that runs the sweep"
    )
    enable.add_argument(
        "--every", default=DEFAULT_EVERY, help=f"how often: 30m, 1h, 1d (default {DEFAULT_EVERY})"
    )
    enable.set_defaults(handler=_enable)
    disable = actions.add_parser("disable", help="delete the weft-retention schedule")
    disable.set_defaults(handler=_disable)
    status = actions.add_parser(
        "status", help="the schedule's state, its last sweeps, and the TTLs in force"
    )
    status.add_argument("--json", action="store_true", help="print it as JSON")
    status.set_defaults(handler=_status)
    run_now = actions.add_parser("run-now", help="run one sweep now and wait for it")
    run_now.add_argument("--json", action="store_true", help="print its result as JSON")
    run_now.set_defaults(handler=_run_now)
    set_ttl = actions.add_parser("set", help="set a tenant's TTL for its closed threads")
    set_ttl.add_argument("--tenant", required=True, help="the tenant (default: `default`)")
    set_ttl.add_argument("--ttl", required=True, help="how long after closing: 90d, 12h, 1d12h")
    set_ttl.set_defaults(handler=_set)
    clear = actions.add_parser("clear", help="drop a tenant's TTL")
    clear.add_argument("--tenant", required=True)
    clear.set_defaults(handler=_clear)


async def _retention(config: WeftConfig) -> tuple[Retention, Store]:
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    return Retention(client, store, task_queue=config.temporal.task_queue), store


async def _enable(args: argparse.Namespace, config: WeftConfig) -> int:
    parse_ttl(args.every, what="--every")  # before connecting: the error names the flag
    retention, store = await _retention(config)
    with store:
        created = await retention.enable(args.every)
    what = "created" if created else "updated"
    print(f"{what} schedule weft-retention: a sweep every {args.every}")
    return 0


async def _disable(args: argparse.Namespace, config: WeftConfig) -> int:
    retention, store = await _retention(config)
    with store:
        deleted = await retention.disable()
    print("deleted schedule weft-retention" if deleted else "retention was not enabled")
    return 0


async def _status(args: argparse.Namespace, config: WeftConfig) -> int:
    agents, problem = _agents(config)
    retention, store = await _retention(config)
    with store:
        status = await retention.status(agents)
    if args.json:
        print(status.model_dump_json(indent=2))
        return 0
    for line in _status_lines(status):
        print(line)
    if problem is not None:
        print(f"weft: agents' TTLs unknown: {problem}", file=sys.stderr)
    return 0


def _agents(config: WeftConfig) -> tuple[dict[str, AgentDef], str | None]:
    """The agents of the configured definitions (the ones workers serve), or why not."""
    try:
        return load_directory(config.path(config.definitions)).agents, None
    except DefinitionError as err:
        return {}, str(err)


def _status_lines(status: RetentionStatus) -> list[str]:
    if not status.enabled:
        lines = ["schedule: not enabled (weft retention enable)"]
    else:
        state = "paused" if status.paused else "active"
        lines = [
            f"schedule: weft-retention, every {status.every}, {state}",
            f"next run: {_time(status.next_run)}",
            f"last run: {_time(status.last_run)}",
        ]
        lines += [f"  {_run_line(run)}" for run in reversed(status.runs)]
    lines.append("tenants:" if status.tenants else "tenants: no TTL set")
    lines += [f"  {tenant}\t{ttl}" for tenant, ttl in status.tenants.items()]
    lines.append("agents:" if status.agents else "agents: no TTL set")
    lines += [f"  {agent}\t{ttl}" for agent, ttl in status.agents.items()]
    return lines


def _run_line(run: RetentionRun) -> str:
    line = f"{_time(run.started_at)}\t{run.status or 'unknown'}"
    if run.result is not None:
        line += f"\t{_summary(run.result)}"
    if run.error:
        line += f"\t{run.error}"
    return line


def _summary(result: RetentionSweepResult) -> str:
    text = f"deleted {result.deleted} threads ({result.expired} expired"
    if result.gone:
        text += f", {result.gone} gone already"
    if result.failures:
        text += f", {result.failures} failed"
    return text + ")"


def _time(moment: datetime | None) -> str:
    return "-" if moment is None else f"{moment:%Y-%m-%d %H:%M:%S}Z"


async def _run_now(args: argparse.Namespace, config: WeftConfig) -> int:
    retention, store = await _retention(config)
    with store:
        result = await retention.run_now()
    if args.json:
        print(result.model_dump_json(indent=2))
        return 0
    print(_summary(result))
    for failure in result.failed:
        print(f"weft: {failure.thread_id} not deleted: {failure.error}", file=sys.stderr)
    return 1 if result.failures else 0


async def _set(args: argparse.Namespace, config: WeftConfig) -> int:
    check_tenant(args.tenant)
    ttl = args.ttl
    parse_ttl(ttl, what="--ttl")
    with await asyncio.to_thread(Store.open, config.store_url()) as store:
        await asyncio.to_thread(store.retention.set_tenant, args.tenant, ttl)
        await audit_trail(store).record(
            audit.RETENTION_SET, audit.RETENTION_SET.done, tenant=args.tenant
        )
    print(f"tenant {args.tenant}: closed threads kept {ttl.strip().lower()} after closing")
    return 0


async def _clear(args: argparse.Namespace, config: WeftConfig) -> int:
    check_tenant(args.tenant)
    with await asyncio.to_thread(Store.open, config.store_url()) as store:
        cleared = await asyncio.to_thread(store.retention.clear_tenant, args.tenant)
        await audit_trail(store).record(
            audit.RETENTION_CLEAR, audit.RETENTION_CLEAR.done, tenant=args.tenant
        )
    print(f"tenant {args.tenant}: " + ("TTL cleared" if cleared else "had no TTL"))
    return 0


__all__ = ["register"]
