"""`weft thread interrupt ID [--turn T] [--reason R]`: stop the running turn (001's
`interrupt_turn` update); the thread stays open. Prints one line saying what happened.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from pydantic import ValidationError

from weft.cli.thread_guard import acting_threads
from weft.contract.messages import InterruptTurnRequest, InterruptTurnResult
from weft.workers.config import WeftConfig


def register(actions_parser: Any) -> None:
    """Add `interrupt` to the `weft thread` subcommands."""
    interrupt = actions_parser.add_parser(
        "interrupt",
        help="stop the running turn; the thread stays open (interrupt_turn update)",
        description="Stop the running turn without a new message: its model or tool call is "
        "cancelled, a pending question or permission is withdrawn, and the thread waits for "
        "input. Queued messages stay queued. Nothing running (or another turn running than "
        "--turn) is a no-op, said so.",
    )
    interrupt.add_argument("thread_id")
    interrupt.add_argument("--turn", dest="turn_id", help="stop only this turn (a turn id)")
    interrupt.add_argument("--reason", help="why; recorded with the turn's end")
    interrupt.set_defaults(handler=run)


EXIT_USAGE = 2
_FLAGS = {"turn_id": "--turn", "reason": "--reason"}


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    try:  # checked here, so a bad value is named by its flag
        InterruptTurnRequest(turn_id=args.turn_id, reason=args.reason)
    except ValidationError as err:
        problem = err.errors()[0]
        flag = _FLAGS.get(str(problem["loc"][-1]), str(problem["loc"][-1]))
        print(f"weft: thread interrupt: {flag}: {problem['msg']}", file=sys.stderr)
        return EXIT_USAGE
    # The thread's refusals become one line in `thread_guard`.
    async with acting_threads(config) as threads:
        result = await threads.interrupt_turn(
            args.thread_id, reason=args.reason, turn_id=args.turn_id
        )
    print(said(args.thread_id, result))
    return 0


def said(thread_id: str, result: InterruptTurnResult) -> str:
    """What the interrupt did, in one line."""
    if result.status == "accepted":
        why = f" ({result.reason})" if result.reason else ""
        return f"turn {result.turn_id} of {thread_id} interrupted{why}: the thread waits for input"
    return f"nothing interrupted on {thread_id}: {result.reason}"
