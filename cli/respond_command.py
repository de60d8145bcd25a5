"""`weft thread respond ID ACTION_ID approve|deny|answer`: answer what a thread waits for
(a tool permission, an ask_human question, an MCP server's elicitation).

The answer goes by the checked update (`respond_action_checked`), so an unknown action or
a decision the action does not take is refused with the thread's reason, not dropped as a
warning the way the fire-and-forget signal would drop it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import ValidationError
from temporalio.client import WorkflowUpdateFailedError

from weft.cli.thread_guard import acting_threads
from weft.client import actions
from weft.workers.config import WeftConfig

EXIT_REFUSED = 1
EXIT_USAGE = 2

_DONE = {"approve": "approved", "deny": "denied", "answer": "answered"}


def register(actions_parser: Any) -> None:
    """Add `respond` to the `weft thread` subcommands."""
    respond = actions_parser.add_parser(
        "respond",
        help="answer a pending action: approve or deny a tool, answer a question or an MCP "
        "elicitation",
        description="Answer one of the thread's pending actions (`weft inbox` lists them, "
        "`weft thread show ID` too). Tool permissions take approve or deny; questions take "
        "answer (with --answer) or deny; an MCP server's elicitation takes answer (with "
        "--answer-json, an object of the fields it asks for) or deny (declines).",
    )
    respond.add_argument("thread_id")
    respond.add_argument("action_id", help="the pending action's id (act_…)")
    respond.add_argument("decision", choices=["approve", "deny", "answer"])
    answers = respond.add_mutually_exclusive_group()
    answers.add_argument("--answer", help="the answer to an ask_human question")
    answers.add_argument(
        "--answer-json",
        metavar="JSON",
        help='the answer as JSON: an elicitation takes an object, e.g. \'{"city": "Oslo"}\'',
    )
    respond.add_argument(
        "--scope",
        choices=["once", "session"],
        default="once",
        help="session: approve this tool for the rest of the session (approve only)",
    )
    respond.add_argument("--reason", help="why, recorded with the decision")
    respond.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Send the answer; print what was decided, or the thread's reason for refusing it."""
    given: Any = args.answer
    if args.answer_json is not None:
        try:
            given = json.loads(args.answer_json)
        except json.JSONDecodeError as err:
            print(f"weft: --answer-json: not JSON ({err})", file=sys.stderr)
            return EXIT_USAGE
    try:
        answer = actions.response(
            args.action_id, args.decision, answer=given, scope=args.scope, reason=args.reason
        )
    except ValidationError as err:
        print(f"weft: {_first_problem(err)}", file=sys.stderr)
        return EXIT_USAGE
    try:
        async with acting_threads(config) as threads:
            result = await threads.respond(args.thread_id, answer)
    except WorkflowUpdateFailedError as err:
        print(f"weft: thread {args.thread_id!r} refused: {err.cause or err}", file=sys.stderr)
        return EXIT_REFUSED
    scope = " for the session" if args.scope == "session" else ""
    print(f"{_DONE[result.decision]} {result.action_id} on {args.thread_id}{scope}")
    return 0


def _first_problem(err: ValidationError) -> str:
    """The first thing wrong with the answer, in the words of its flags."""
    problem = err.errors()[0]
    message = str(problem["msg"]).removeprefix("Value error, ")
    field = ".".join(str(part) for part in problem["loc"])
    return f"{field}: {message}" if field else message
