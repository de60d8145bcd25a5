"""`weft thread fork ID --at TURN_ID|SEQ` and `weft thread rewind ID --at TURN_ID`: start a
thread from a thread's state as of a point between turns (docs/time-travel.md).

A fork runs on the source's definitions, or on `--definitions DIR` (the config's folder when
only `--agent` names another agent), with `--prompt` / `--model` changed if given. A rewind
is a fork that takes over: the source is closed, naming its successor. Each is recorded in
the audit log as `cli:<os user>`, with the source's tenant (the fork's too).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import check_new_thread_id, cli_subject
from weft.client.audit_trail import FORK, REWIND, AuditTrail, ControlAction
from weft.client.forks import ForkRefused, ForkResult, Forks
from weft.store import Store
from weft.workers.config import WeftConfig
from weft.workers.secrets import load_keyring

EXIT_REFUSED = 1


def register(actions_parser: Any) -> None:
    """Add `fork` and `rewind` to the `weft thread` subcommands."""
    fork = actions_parser.add_parser(
        "fork",
        help="start a thread from another's state at a turn or event (docs/time-travel.md)",
        description="Start a new thread whose transcript, key-value data and files are the "
        "source's as of a point between turns; the source is not disturbed.",
    )
    fork.add_argument("thread_id", help="the source thread")
    _at(fork, "a turn id (after it ended) or an event sequence of the source")
    fork.add_argument("--agent", help="run the fork as this agent (from --definitions)")
    fork.add_argument("--model", help="the model of the fork's prompt, by definition name")
    fork.add_argument("--prompt", help="the prompt of the fork's agent, by definition name")
    fork.add_argument("--definitions", help="a definitions folder to take the agent from")
    fork.add_argument("--id", dest="fork_id", help="the fork's thread id (default: generated)")
    fork.add_argument("--json", action="store_true", help="print the result as JSON")
    # A closed thread can be forked: its state is all in the store and its history.
    fork.set_defaults(handler=run_fork, closed_ok=True)

    rewind = actions_parser.add_parser(
        "rewind",
        help="fork a thread at a turn and close it in the fork's favour",
        description="Fork the thread after a turn, then close it with a pointer to the fork: "
        "its followers (tail, SSE, GET /threads/{id}) are told where to go.",
    )
    rewind.add_argument("thread_id")
    _at(rewind, "the turn id to go back to (after it ended)")
    rewind.add_argument("--reason", help="why, kept in the source's close reason")
    rewind.add_argument("--json", action="store_true", help="print the result as JSON")
    rewind.set_defaults(handler=run_rewind)


def _at(parser: argparse.ArgumentParser, text: str) -> None:
    parser.add_argument("--at", required=True, metavar="TURN_ID|SEQ", help=text)


async def run_fork(args: argparse.Namespace, config: WeftConfig) -> int:
    await check_new_thread_id(args, config, args.fork_id)
    definitions = args.definitions
    if definitions is None and args.agent is not None:
        definitions = str(config.path(config.definitions))
    return await _run(
        args,
        config,
        lambda forks: forks.fork(
            args.thread_id,
            at=args.at,
            agent=args.agent,
            model=args.model,
            prompt=args.prompt,
            definitions=definitions,
            fork_id=args.fork_id,
        ),
        FORK,
    )


async def run_rewind(args: argparse.Namespace, config: WeftConfig) -> int:
    return await _run(
        args,
        config,
        lambda forks: forks.rewind(args.thread_id, at=args.at, reason=args.reason),
        REWIND,
    )


async def _run(
    args: argparse.Namespace, config: WeftConfig, act: Any, action: ControlAction
) -> int:
    verb = "rewound" if action is REWIND else "forked"
    keyring = load_keyring(config)
    store = await asyncio.to_thread(Store.open, config.store_url(), keyring=keyring)
    try:
        client = await client_from_config(config)
        forks = Forks(client, store, task_queue=config.temporal.task_queue)
        trail = AuditTrail(store, cli_subject(), client=client)
        try:
            async with trail.acting(action, thread_id=args.thread_id):
                result: ForkResult = await act(forks)
        except (ForkRefused, ValueError) as err:
            print(f"weft: {err}", file=sys.stderr)
            return EXIT_REFUSED
    finally:
        await asyncio.to_thread(store.close)
    if args.json:
        print(json.dumps(result.model_dump(mode="json", by_alias=True)))
        return 0
    link = result.forked_from
    turn = f" (end of turn {link.at_turn_id})" if link.at_turn_id else ""
    where = "continued by" if verb == "rewound" else "new thread"
    print(
        f"{verb} {link.thread_id} at event {link.at_sequence}{turn}: {where} {result.thread_id}"
        f" ({result.messages} messages)"
    )
    return 0
