"""`weft thread list [--agent A] [--schedule NAME] [--status S]`: the task queue's threads,
filtered and shown in the status vocabulary of `GET /threads` (client/thread_status.py,
docs/thread-status.md); under `weft --tenant T`, T's only."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from weft.cli.temporal_client import client_from_config
from weft.client.schedules import schedule_ids
from weft.client.thread_status import STATUS_MEANINGS, STATUS_QUERIES, thread_state, threads_query
from weft.client.thread_tenant import tenant_clause
from weft.workers.config import WeftConfig


def register(actions: Any) -> None:
    """Add `list` to the `weft thread` subcommands."""
    listing = actions.add_parser(
        "list",
        help="list threads from Temporal visibility (id, agent, status, started)",
        description="List the threads of the configured task queue, newest first: id, "
        "agent,\nstatus, start time. --status takes the statuses of GET /threads\n"
        "(docs/thread-status.md):\n\n"
        + "\n".join(f"  {name:<19} {meaning}" for name, meaning in STATUS_MEANINGS.items()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    listing.add_argument("--agent", help="only threads of this agent")
    listing.add_argument("--schedule", help="only threads this weft schedule started")
    listing.add_argument(
        "--status",
        choices=list(STATUS_MEANINGS),
        metavar="STATUS",
        help=f"only threads with this status: {', '.join(STATUS_MEANINGS)}",
    )
    listing.add_argument("--limit", type=_positive, default=50, help="at most this many")
    listing.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """The threads of the task queue, filtered as `GET /threads` filters them."""
    client = await client_from_config(config)
    clauses = [threads_query(config.temporal.task_queue)]
    if args.agent:
        clauses.append(f"WeftAgent = '{_quote(args.agent)}'")
    if args.schedule:
        # Temporal's own attribute: set on the threads of every weft schedule (docs/schedules.md).
        names = schedule_ids(args.schedule, args.acting_tenant)
        clauses.append(f"TemporalScheduledById IN ({', '.join(_quoted(n) for n in names)})")
    if args.status:
        clauses.append(STATUS_QUERIES[args.status])
    if args.acting_tenant:  # `weft --tenant T`: T's threads only
        clauses.append(tenant_clause(args.acting_tenant))
    count = 0
    async for execution in client.list_workflows(" AND ".join(clauses), limit=args.limit):
        attrs = execution.typed_search_attributes
        agent = next((p.value for p in attrs if p.key.name == "WeftAgent"), "?")
        weft_status = next((p.value for p in attrs if p.key.name == "WeftStatus"), None)
        status = thread_state(execution.status, weft_status)
        print(f"{execution.id}\t{agent}\t{status}\t{execution.start_time:%Y-%m-%d %H:%M:%S}")
        count += 1
    if count == 0:
        print("no threads", file=sys.stderr)
    return 0


def _quoted(value: str) -> str:
    return f"'{_quote(value)}'"


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return int(text)
