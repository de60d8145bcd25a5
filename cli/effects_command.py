"""`weft thread effects ID`, `schedule-effect` and `remove-effect`: a thread's scheduled effects.

Scheduling and removing go through the CLI's `Threads` (`thread_guard.acting_threads`), which
records each in the audit log as `cli:<os user>`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError

from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import acting_threads
from weft.client.schedule_inputs import ScheduleError, parse_duration
from weft.client.threads import Threads
from weft.contract.effects import MAX_DELAY_MS, ScheduleEffectRequest
from weft.workers.config import WeftConfig


def register(actions: Any) -> None:
    """Add the effect commands to the `weft thread` subcommands."""
    listing = actions.add_parser("effects", help="list a thread's pending scheduled effects")
    listing.add_argument("thread_id")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    listing.set_defaults(handler=show)
    schedule = actions.add_parser(
        "schedule-effect", help="schedule an effect on a thread (schedule_effect update)"
    )
    schedule.add_argument("thread_id")
    schedule.add_argument("name", help="the effect's name (effects/NAME.py)")
    schedule.add_argument("--args", default="{}", help="its arguments, a JSON object")
    schedule.add_argument("--in", dest="delay", default="0s", help="delay: 30s, 5m, 2h, 1d")
    schedule.add_argument("--id", help="an idempotency key: a pending effect of this id stays")
    schedule.set_defaults(handler=schedule_one)
    remove = actions.add_parser("remove-effect", help="remove a pending effect by id")
    remove.add_argument("thread_id")
    remove.add_argument("effect_id")
    remove.set_defaults(handler=remove_one)


async def show(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print the pending effects, soonest first (a table, or JSON)."""
    effects = await (await _threads(config)).effects(args.thread_id)
    if args.json:
        print(json.dumps(effects, indent=2))
        return 0
    if not effects:
        print(f"thread {args.thread_id} has no pending effects")
        return 0
    for effect in effects:
        due = " (due: waits for the running step)" if effect.get("due") else ""
        print(
            f"{effect['id']}  {effect['name']}  at {effect['scheduledAt']}{due}"
            f"  args {json.dumps(effect['args'])}  by {effect.get('scheduledBy') or '?'}"
        )
    return 0


# The flag (or argument) each field of the request comes from, for one-line errors.
_FLAGS = {"name": "NAME", "args": "--args", "delay_ms": "--in", "id": "--id"}


async def schedule_one(args: argparse.Namespace, config: WeftConfig) -> int:
    """Schedule the effect; print its id and due time, or why the thread refused it."""
    try:
        request = _request(args)
    except (ValueError, ScheduleError) as err:
        print(f"weft: {err}", file=sys.stderr)
        return 2
    try:
        async with acting_threads(config) as threads:
            result = await threads.schedule_effect(
                args.thread_id,
                request.name,
                request.args,
                delay_ms=request.delay_ms,
                effect_id=request.id,
            )
    except WorkflowUpdateFailedError as err:
        print(f"weft: thread {args.thread_id} refused the effect: {err.cause}", file=sys.stderr)
        return 1
    print(f"{result.id} {result.status}, due at {result.scheduled_at}")
    return 0


def _request(args: argparse.Namespace) -> ScheduleEffectRequest:
    """The request the flags describe; a bad one is a ValueError naming its flag."""
    try:
        effect_args = json.loads(args.args)
    except json.JSONDecodeError as err:
        raise ValueError(f"--args: not JSON ({err})") from None
    if not isinstance(effect_args, dict):
        raise ValueError("--args must be a JSON object")
    delay = parse_duration(args.delay, what="--in")
    try:
        return ScheduleEffectRequest(
            name=args.name,
            args=effect_args,
            delay_ms=round(delay.total_seconds() * 1000),
            id=args.id,
        )
    except ValidationError as err:
        problem = err.errors()[0]
        field = str(problem["loc"][0]) if problem["loc"] else ""
        flag = _FLAGS.get(field, field)
        if field == "delay_ms" and problem["type"] == "less_than_equal":
            message = f"at most {MAX_DELAY_MS // 86_400_000} days"
        else:
            message = str(problem["msg"])
        raise ValueError(f"{flag}: {message} (got {_given(args, field)!r})") from None


def _given(args: argparse.Namespace, field: str) -> object:
    return {"name": args.name, "delay_ms": args.delay, "id": args.id}.get(field, args.args)


async def remove_one(args: argparse.Namespace, config: WeftConfig) -> int:
    """Remove the effect; exit 1 when no such effect was pending."""
    try:
        async with acting_threads(config) as threads:
            removed = await threads.remove_effect(args.thread_id, args.effect_id)
    except WorkflowUpdateFailedError as err:
        print(f"weft: thread {args.thread_id} refused: {err.cause}", file=sys.stderr)
        return 1
    if not removed:
        print(
            f"weft: thread {args.thread_id} has no pending effect {args.effect_id}", file=sys.stderr
        )
        return 1
    print(f"removed {args.effect_id}")
    return 0


async def _threads(config: WeftConfig) -> Threads:
    temporal = config.temporal
    client = await client_from_config(config)
    return Threads(client, task_queue=temporal.task_queue)
