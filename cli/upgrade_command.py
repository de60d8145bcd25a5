"""`weft thread upgrade ID`: move a thread to the newest definitions its workers serve (the
`upgrade_definitions` update). Prints one line saying what happened.
"""

from __future__ import annotations

import argparse
from typing import Any

from weft.cli.thread_guard import acting_threads
from weft.contract.definitions_version import UpgradeResult
from weft.workers.config import WeftConfig


def register(actions_parser: Any) -> None:
    """Add `upgrade` to the `weft thread` subcommands."""
    upgrade = actions_parser.add_parser(
        "upgrade",
        help="move the thread to the newest definitions (upgrade_definitions update)",
        description="Move the thread to the definitions its workers serve now: at once when "
        "it is idle, else before its next turn. The move is recorded as policy.changed. "
        "This is how a thread of a `definitionsPolicy: pinned` agent takes new definitions.",
    )
    upgrade.add_argument("thread_id")
    upgrade.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    # The thread's refusals become one line in `thread_guard`.
    async with acting_threads(config) as threads:
        result = await threads.upgrade(args.thread_id)
    print(said(args.thread_id, result))
    return 0


def said(thread_id: str, result: UpgradeResult) -> str:
    """What the upgrade did, in one line."""
    if result.status == "upgraded":
        changed = ", ".join(f"{c.kind} {c.name} ({c.change})" for c in result.changes)
        return (
            f"{thread_id} upgraded: definitions {_short(result.previous_digest)} -> "
            f"{_short(result.digest)}; changed: {changed or 'nothing named'}"
        )
    if result.status == "unchanged":
        return f"{thread_id} already runs the newest definitions ({_short(result.digest)})"
    return (
        f"{thread_id} is running a turn: it moves to the newest definitions before its "
        f"next turn (now {_short(result.previous_digest)})"
    )


def _short(digest: str | None) -> str:
    return digest[:12] if digest else "unknown"
