"""`weft schedule …`: agents that wake up on their own, as Temporal Schedules.

Creates, pauses, unpauses, triggers and deletes are recorded in the audit log as
`cli:<os user>`, with the schedule's tenant (`_recorded`).

Under `weft --tenant T` every action keeps to T's schedules (`Schedules(tenant=T)`):
another tenant's schedule is `no schedule named 'x'`, worded as a missing one, refused
before anything is done or recorded (as another tenant's task is); `list` lists T's and
`create` makes T's (`--tenant` defaults to T and may not name another)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import audit_trail
from weft.client.audit_trail import (
    SCHEDULE_CREATE,
    SCHEDULE_DELETE,
    SCHEDULE_PAUSE,
    SCHEDULE_TRIGGER,
    SCHEDULE_UNPAUSE,
    ControlAction,
    Outcome,
)
from weft.client.schedule_inputs import checked_catchup_window, checked_interval
from weft.client.schedules import (
    DEFAULT_CATCHUP_WINDOW,
    OVERLAP_NAMES,
    Schedules,
    WeftSchedule,
)
from weft.store import Store
from weft.workers.config import WeftConfig


def register(commands: Any) -> None:
    """Add `weft schedule` and its actions to the `weft` subcommands."""
    schedule = commands.add_parser(
        "schedule", help="run agents on a timetable (Temporal Schedules; docs/schedules.md)"
    )
    actions = schedule.add_subparsers(dest="schedule_action", required=True)
    _register_create(actions)
    listing = actions.add_parser("list", help="list weft's schedules")
    listing.add_argument("--tenant", help="only this tenant's schedules")
    listing.set_defaults(handler=_list)
    show = actions.add_parser("show", help="print one schedule as JSON")
    show.add_argument("name")
    show.set_defaults(handler=_show)
    pause = actions.add_parser("pause", help="stop firing until unpaused")
    pause.add_argument("name")
    pause.add_argument("--note", help="why (shown by list)")
    pause.set_defaults(handler=_pause)
    unpause = actions.add_parser("unpause", help="fire again from the next scheduled time")
    unpause.add_argument("name")
    unpause.add_argument("--note", help="why (shown by list)")
    unpause.set_defaults(handler=_unpause)
    trigger = actions.add_parser("trigger", help="fire once now")
    trigger.add_argument("name")
    trigger.set_defaults(handler=_trigger)
    delete = actions.add_parser("delete", help="delete the schedule (its threads go on)")
    delete.add_argument("name")
    delete.set_defaults(handler=_delete)


def _register_create(actions: Any) -> None:
    create = actions.add_parser(
        "create", help="create a schedule that messages a thread or starts new threads"
    )
    create.add_argument("name", help="the schedule id (letters, digits, '.', '_', '-')")
    when = create.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", help='a cron expression, e.g. "0 9 * * 1-5" (UTC by default)')
    when.add_argument("--every", help="an interval, e.g. 30s, 5m, 1h, 1h30m")
    target = create.add_mutually_exclusive_group(required=True)
    target.add_argument("--thread", help="queue the message to this running thread")
    target.add_argument("--agent", help="start a new thread of this agent on each run")
    create.add_argument("-m", "--message", required=True, help="the user message to send")
    create.add_argument("--time-zone", help="IANA time zone of --cron, e.g. Europe/Oslo")
    create.add_argument(
        "--overlap",
        choices=OVERLAP_NAMES,
        help="when a run is due while the last one still runs"
        " (default: skip for --thread, allow_all for --agent)",
    )
    create.add_argument(
        "--catchup-window",
        help="how far back missed runs are made up after an outage"
        f" (default {int(DEFAULT_CATCHUP_WINDOW.total_seconds() // 60)}m, minimum 10s)",
    )
    create.add_argument("--note", help="a note kept on the schedule")
    create.add_argument(
        "--tenant",
        help="the tenant whose threads an --agent schedule starts (default: default);"
        " a --thread schedule is its thread's tenant's",
    )
    create.set_defaults(handler=_create)


async def _schedules(args: argparse.Namespace, config: WeftConfig) -> Schedules:
    """The schedules the command reaches: every tenant's, or under `weft --tenant T`
    (`args.acting_tenant`, set by `confine_to_tenant`) T's only."""
    client = await client_from_config(config)
    tenant = getattr(args, "acting_tenant", None)
    return Schedules(client, task_queue=config.temporal.task_queue, tenant=tenant)


@asynccontextmanager
async def _recorded(
    config: WeftConfig, action: ControlAction, name: str, tenant: str | None = None
) -> AsyncIterator[Outcome]:
    """The body as `action` on schedule `name`, recorded once its outcome is known; the
    body sets `outcome.tenant` once it has read the schedule's."""
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        async with audit_trail(store).acting(action, tenant=tenant, name=name) as outcome:
            yield outcome
    finally:
        store.close()


@asynccontextmanager
async def _acting_on(
    args: argparse.Namespace, config: WeftConfig, action: ControlAction
) -> AsyncIterator[Schedules]:
    """The schedules for the body doing `action` on schedule `args.name`, recorded with
    the schedule's tenant once its outcome is known, under its full name (`acme:x` for
    acme's `x`). Under `--tenant`, a schedule that is not the tenant's is refused before
    the action, unrecorded; the operator's refusals (a missing schedule) are recorded, as
    before tenants. The operator names schedules in full."""
    schedules = await _schedules(args, config)
    if schedules.tenant is None:
        async with _recorded(config, action, args.name) as outcome:
            outcome.tenant = (await schedules.describe(args.name)).tenant
            yield schedules
        return
    described = await schedules.describe(args.name)
    async with _recorded(config, action, described.name, described.tenant):
        yield schedules


async def _create(args: argparse.Namespace, config: WeftConfig) -> int:
    # Checked here first so that an error names the flag the user typed, not the API's name.
    if args.every is not None:
        checked_interval(args.every, what="--every")
    checked_catchup_window(args.catchup_window, what="--catchup-window")
    schedules = await _schedules(args, config)
    async with _recorded(config, SCHEDULE_CREATE, args.name, args.tenant) as outcome:
        handle = await schedules.create(
            args.name,
            message=args.message,
            thread=args.thread,
            agent=args.agent,
            cron=args.cron,
            every=args.every,
            time_zone=args.time_zone,
            overlap=args.overlap,
            catchup_window=args.catchup_window,
            note=args.note,
            tenant=args.tenant,
        )
        created = await schedules.describe(handle.id)  # `T:NAME` when a tenant's
        outcome.tenant = created.tenant  # a --thread schedule's is its thread's
        outcome.params["name"] = created.name
    print(f"created schedule {created.name}: {created.target.summary()}, {created.spec}")
    return 0


async def _list(args: argparse.Namespace, config: WeftConfig) -> int:
    found = await (await _schedules(args, config)).list(tenant=args.tenant)
    for schedule in found:
        print(_row(schedule))
    if not found:
        print("no schedules", file=sys.stderr)
    return 0


def _row(schedule: WeftSchedule) -> str:
    """name, target, spec, state, next run, last run: tab-separated, one line."""
    state = "paused" if schedule.paused else "active"
    if schedule.paused and schedule.note:
        state += f" ({schedule.note})"
    following = _time(schedule.next_runs[0]) if schedule.next_runs else "-"
    last = schedule.last_run
    if last is None:
        outcome = "no runs yet"
    else:
        # An `--agent` run's status is its thread's, so the thread is what the line names.
        outcome = f"{last.status or 'unknown'} {last.thread_id or last.workflow_id}"
        if last.error:
            outcome += f": {last.error}"
    columns = [schedule.name, schedule.target.summary(), schedule.spec, state, following]
    return "\t".join([*columns, f"last: {outcome}"])


def _time(moment: datetime) -> str:
    return f"next {moment:%Y-%m-%d %H:%M:%S}Z"


async def _show(args: argparse.Namespace, config: WeftConfig) -> int:
    schedule = await (await _schedules(args, config)).describe(args.name)
    print(schedule.model_dump_json(indent=2))
    return 0


async def _pause(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _acting_on(args, config, SCHEDULE_PAUSE) as schedules:
        await schedules.pause(args.name, note=args.note)
    print(f"paused schedule {args.name}")
    return 0


async def _unpause(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _acting_on(args, config, SCHEDULE_UNPAUSE) as schedules:
        await schedules.unpause(args.name, note=args.note)
    print(f"unpaused schedule {args.name}")
    return 0


async def _trigger(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _acting_on(args, config, SCHEDULE_TRIGGER) as schedules:
        await schedules.trigger(args.name)
    print(f"triggered schedule {args.name}")
    return 0


async def _delete(args: argparse.Namespace, config: WeftConfig) -> int:
    async with _acting_on(args, config, SCHEDULE_DELETE) as schedules:
        await schedules.delete(args.name)
    print(f"deleted schedule {args.name}")
    return 0
