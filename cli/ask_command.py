"""`weft thread ask ID TEXT`: send a message, wait for its turn to end, print the answer."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from temporalio.client import WorkflowUpdateFailedError

from weft.cli.thread_guard import acting_threads
from weft.client.ask import TurnWaitTimeout
from weft.contract.turns import TurnResult
from weft.workers.config import WeftConfig


def register(actions: Any) -> None:
    """Add `ask` to the `weft thread` subcommands."""
    ask = actions.add_parser(
        "ask", help="send a message and print the answer when its turn ends (submit_turn wait)"
    )
    ask.add_argument("thread_id")
    ask.add_argument("text")
    ask.add_argument(
        "--policy",
        default="enqueue",
        choices=["enqueue", "interrupt", "reject"],
        help="if a turn is running: queue (default), interrupt its model call, or refuse",
    )
    ask.add_argument("--update-id", help="wait for an earlier ask by its update id")
    ask.add_argument("--timeout", type=float, help="give up after this many seconds")
    ask.add_argument("--json", action="store_true", help="print the turn result as JSON")
    ask.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print the answer; a turn that did not complete exits 1 with its stop reason."""
    try:
        async with acting_threads(config) as threads:
            result = await threads.ask(
                args.thread_id,
                args.text,
                policy=args.policy,
                update_id=args.update_id,
                timeout=args.timeout,
            )
    except TurnWaitTimeout as err:
        print(f"weft: {err}", file=sys.stderr)
        return 1
    except WorkflowUpdateFailedError as err:
        print(f"weft: thread {args.thread_id} refused the message: {err.cause}", file=sys.stderr)
        return 1
    return _show(result, as_json=args.json)


def _show(result: TurnResult, *, as_json: bool) -> int:
    if as_json:
        print(result.model_dump_json(indent=2))
    elif result.response is not None:
        print(result.response)
    if result.status == "completed":
        return 0
    print(
        f"weft: turn {result.turn_id} {result.status}"
        f" ({result.stop_reason or 'no stop reason'}): {result.error or ''}".rstrip(": "),
        file=sys.stderr,
    )
    return 1
