"""`weft inbox`: the threads waiting on a human, and what each one waits for.

Temporal visibility (the `WeftAwaitingAction` search attribute) finds the threads; each
thread's own read model then says what it waits for, since the search attribute lags: a
thread listed but already answered shows no pending action and is left out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any, cast

from temporalio.client import Client

from weft.activities.store import Store
from weft.cli.temporal_client import client_from_config
from weft.client import actions, resume
from weft.contract.actions import ActionKind
from weft.contract.thread import ThreadRead
from weft.workers.config import WeftConfig

# Threads whose read models are fetched at once: each is one query a worker answers.
_READS_AT_ONCE = 8


def register(commands: Any) -> None:
    """Add `weft inbox` to the top-level commands."""
    inbox = commands.add_parser(
        "inbox",
        help="list the threads waiting on a human and what each waits for",
        description="The threads waiting on a human (a tool permission or an ask_human "
        "question), with each pending action: the tool and its arguments, or the question. "
        "Threads are found through Temporal visibility, which is eventually consistent: a "
        "thread that just started waiting may take a moment to appear. Answer with "
        "`weft thread respond THREAD ACTION approve|deny|answer`.",
    )
    inbox.add_argument("--kind", choices=["ask_human", "tool_permission"], help="only this kind")
    inbox.add_argument("--agent", help="only threads of this agent")
    inbox.add_argument("--json", action="store_true", help="print the threads as JSON")
    inbox.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print one line per pending action (or JSON); an empty inbox says so on stderr."""
    client = await client_from_config(config)
    kind = cast(ActionKind | None, args.kind)
    thread_ids = await actions.waiting_threads(client, kind, agent=args.agent)
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        reads = await _read_all(client, store, thread_ids)
    finally:
        store.close()
    waiting = [
        (read, pending)
        for read in reads
        if (pending := [a for a in read.pending_actions if kind is None or a.get("kind") == kind])
    ]
    if args.json:
        print(json.dumps([_as_json(read, pending) for read, pending in waiting], indent=2))
        return 0
    if not waiting:
        print("no thread is waiting on a human", file=sys.stderr)
    for read, pending in waiting:
        for action in pending:
            print(
                f"{read.thread_id}\t{read.agent}\t{action.get('kind')}\t"
                f"{action.get('actionId')}\t{describe(action)}"
            )
    return 0


def describe(action: dict[str, Any]) -> str:
    """What the action asks: the tool call to approve, or the question to answer."""
    if action.get("kind") == "ask_human":
        return f"asks: {action.get('prompt')}"
    args = json.dumps(action.get("args") or {}, ensure_ascii=False)
    return f"{action.get('toolName')}({args})"


async def _read_all(client: Client, store: Store, thread_ids: list[str]) -> list[ThreadRead]:
    """The read model of each thread, in the order visibility listed them."""
    limit = asyncio.Semaphore(_READS_AT_ONCE)

    async def one(thread_id: str) -> ThreadRead | None:
        async with limit:
            return await resume.thread_read(client, store, thread_id)

    found = await asyncio.gather(*(one(thread_id) for thread_id in thread_ids))
    return [read for read in found if read is not None]


def _as_json(read: ThreadRead, pending: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "threadId": read.thread_id,
        "agent": read.agent,
        "status": read.status,
        "pendingActions": pending,
    }
