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

from weft.cli.temporal_client import client_from_config
from weft.client import actions, resume
from weft.contract.actions import ActionKind
from weft.contract.thread import ThreadRead
from weft.store import Store
from weft.workers.config import WeftConfig

# Threads whose read models are fetched at once: each is one query a worker answers.
_READS_AT_ONCE = 8


def register(commands: Any) -> None:
    """Add `weft inbox` to the top-level commands."""
    inbox = commands.add_parser(
        "inbox",
        help="list the threads waiting on a human and what each waits for",
        description="The threads waiting on a human (a tool permission, an ask_human "
        "question or an MCP server's elicitation), with each pending action: the tool and its "
        "arguments, the question, or the server's message and the fields it asks for (* "
        "marks a required one). Threads are found through Temporal visibility, which is "
        "eventually consistent: a thread that just started waiting may take a moment to "
        "appear. Answer with `weft thread respond THREAD ACTION approve|deny|answer` (an "
        "elicitation: `answer --answer-json '{\"field\": ...}'`, or `deny` to decline).",
    )
    inbox.add_argument(
        "--kind", choices=["ask_human", "tool_permission", "elicitation"], help="only this kind"
    )
    inbox.add_argument("--agent", help="only threads of this agent")
    # Under `weft --tenant T`, only T's threads (cli/thread_guard.py).
    inbox.add_argument("--json", action="store_true", help="print the threads as JSON")
    inbox.set_defaults(handler=run)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print one line per pending action (or JSON); an empty inbox says so on stderr."""
    client = await client_from_config(config)
    kind = cast(ActionKind | None, args.kind)
    thread_ids = await actions.waiting_threads(
        client, kind, agent=args.agent, tenant=args.acting_tenant
    )
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
    """What the action asks: the tool call to approve, the question to answer, or what an
    MCP server asks for (its message and fields)."""
    if action.get("kind") == "ask_human":
        return f"asks: {action.get('prompt')}"
    args = action.get("args") or {}
    if action.get("kind") == "elicitation":
        schema = args.get("requestedSchema") or {}
        return (
            f"MCP {args.get('server')} (in {action.get('toolName')}) asks: "
            f"{action.get('prompt')} [{_fields(schema) or 'no fields'}]"
        )
    return f"{action.get('toolName')}({json.dumps(args, ensure_ascii=False)})"


def _fields(schema: dict[str, Any]) -> str:
    """`name*: string, size: small|large`: each requested field, `*` when required."""
    properties = schema.get("properties")
    required = set(schema.get("required") or [])
    if not isinstance(properties, dict):
        return ""
    shown = []
    for name, field in properties.items():
        field = field if isinstance(field, dict) else {}
        enum = field.get("enum")
        kind = "|".join(map(str, enum)) if isinstance(enum, list) else field.get("type", "?")
        shown.append(f"{name}{'*' if name in required else ''}: {kind}")
    return ", ".join(shown)


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
