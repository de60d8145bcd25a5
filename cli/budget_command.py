"""`weft thread budget ID [--max-… N] [--clear LIMIT]`: show or set a thread tree's budget.

Without limits it prints the budget from `thread_read`. With limits it sends the checked
`set_budget` update, so bad values and threads that spend from another root's budget are
refused with the thread's reason; a raise resumes a turn the spent budget stopped unless
`--no-resume` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, get_args

from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError

from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import acting_threads
from weft.client.threads import Threads
from weft.contract.budget import Budget, BudgetLimitName, BudgetState, SetBudget
from weft.workers.config import WeftConfig

EXIT_REFUSED = 1
EXIT_USAGE = 2

_FLAGS = {
    "max_tokens": ("--max-tokens", int, "input + output tokens of every attempt"),
    "max_cost_usd": ("--max-cost-usd", float, "priced cost of every attempt, in USD"),
    "max_model_calls": ("--max-model-calls", int, "model attempts, failed ones included"),
    "max_wall_seconds": ("--max-wall-seconds", float, "seconds since the root thread started"),
}


def register(actions_parser: Any) -> None:
    """Add `budget` to the `weft thread` subcommands."""
    budget = actions_parser.add_parser(
        "budget",
        help="show or set the budget of a thread's tree (docs/budgets.md)",
        description="Without limits, print the tree's budget against its spend. With limits, "
        "set them on the tree's root (children spend from it); a raise resumes a turn the "
        "spent budget stopped.",
    )
    budget.add_argument("thread_id")
    for dest, (flag, kind, text) in _FLAGS.items():
        budget.add_argument(flag, dest=dest, type=kind, help=text)
    budget.add_argument(
        "--clear",
        action="append",
        default=[],
        choices=list(get_args(BudgetLimitName)),
        help="remove a cap (repeatable)",
    )
    budget.add_argument(
        "--no-resume", action="store_true", help="do not resume a turn the budget stopped"
    )
    budget.add_argument(
        "--json", action="store_true", help="after a set, print the budget as JSON, not a line"
    )
    budget.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    limits = {dest: getattr(args, dest) for dest in _FLAGS if getattr(args, dest) is not None}
    if not limits and not args.clear:
        threads = Threads(await client_from_config(config), task_queue=config.temporal.task_queue)
        read = await threads.read(args.thread_id)
        if read.budget is None:
            print(f"thread {args.thread_id} has no budget")
        else:
            print(_render(read.budget))
        return 0
    try:
        request = SetBudget(budget=Budget(**limits), clear=args.clear, resume=not args.no_resume)
    except ValidationError as err:
        problem = err.errors()[0]
        message = str(problem["msg"]).removeprefix("Value error, ")
        field = str(problem["loc"][-1]) if problem["loc"] else ""
        flag = _FLAGS[field][0] if field in _FLAGS else field
        print(f"weft: {flag + ': ' if flag else ''}{message}", file=sys.stderr)
        return EXIT_USAGE
    # Checked before connecting: a bad limit needs no Temporal to be refused.
    try:
        async with acting_threads(config) as threads:
            state = await threads.set_budget(
                args.thread_id, request.budget, clear=request.clear, resume=request.resume
            )
    except WorkflowUpdateFailedError as err:
        print(f"weft: thread {args.thread_id!r} refused: {err.cause or err}", file=sys.stderr)
        return EXIT_REFUSED
    print(_render(state) if args.json else _said(state, request))
    return 0


def _said(state: BudgetState, request: SetBudget) -> str:
    """What the set did, in one line: the tree's limits now, and what was cleared."""
    limits = state.limits.model_dump(by_alias=True, exclude_none=True)
    now = ", ".join(f"{name} {value}" for name, value in limits.items()) or "no limits"
    cleared = f"; cleared {', '.join(request.clear)}" if request.clear else ""
    return f"budget of the tree of {state.root_thread_id} set: {now}{cleared}"


def _render(state: BudgetState) -> str:
    return json.dumps(state.model_dump(mode="json", by_alias=True, exclude_none=True), indent=2)
