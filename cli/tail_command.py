"""`weft thread tail ID`: follow a thread's events from the store, as a transcript or JSON.

Events do not carry what the user sent (the queue events name entries, not their text), so
the transcript reads the user's messages from the store when a step takes them from the
queue: the step's `queue.changed` "drained" event is written in one commit with the
messages it drained, so they are there when the event is.

Following, the tail also waits for the thread's workflow to close: it then prints the
events still to come and one line saying how the thread ended, and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from weft.cli.render import TranscriptPrinter
from weft.cli.temporal_client import client_from_config
from weft.client.thread_status import closed_as, is_closed
from weft.client.threads import tail_events
from weft.contract.events import Event
from weft.store import Store
from weft.workers.config import WeftConfig


def register(actions: Any) -> None:
    """Add `tail` to the `weft thread` subcommands."""
    tail = actions.add_parser("tail", help="follow a thread's events (streams model text)")
    tail.add_argument("thread_id")
    tail.add_argument("--after", type=int, default=0, help="start after this sequence")
    tail.add_argument("--json", action="store_true", help="print raw events as JSON lines")
    tail.add_argument(
        "--no-follow",
        action="store_true",
        help="stop at the end of the log (default: follow until the thread closes)",
    )
    # It reads the store: a closed thread's events are still there.
    tail.set_defaults(handler=run, closed_ok=True)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print the events until the thread closes or the user interrupts (or the end of the
    log with --no-follow)."""
    store = await asyncio.to_thread(Store.open, config.store_url())
    printer = TranscriptPrinter(sys.stdout)
    users = UserMessages(store, args.thread_id)
    closed = asyncio.Event()
    ended: list[str] = []
    watcher = None
    if not args.no_follow:
        client = await client_from_config(config)
        watcher = asyncio.create_task(_watch_close(client, args.thread_id, closed, ended))
    try:
        async for event in tail_events(
            store, args.thread_id, after=args.after, follow=not args.no_follow, stop=closed
        ):
            if args.json:
                print(json.dumps(event.to_wire()), flush=True)
                continue
            for text in await asyncio.to_thread(users.drained_by, event):
                printer.user(text)
            printer.show(event)
    finally:
        if watcher is not None:
            watcher.cancel()
        store.close()
    if ended:
        # On stderr with --json, so stdout stays one event per line.
        print(
            f"thread {args.thread_id} ended" + (f" ({ended[0]})" if ended[0] else ""),
            file=sys.stderr if args.json else sys.stdout,
            flush=True,
        )
    return 0


async def _watch_close(
    client: Client, thread_id: str, closed: asyncio.Event, ended: list[str]
) -> None:
    """Set `closed` once the thread's workflow has closed, with how it ended in `ended`.

    The workflow writes its last events before it closes, so once it has, the tail reads
    to the end of the store and stops.
    """
    handle = client.get_workflow_handle(thread_id)
    try:
        await handle.result()  # long-polls, following runs that continue as new
    except WorkflowFailureError:
        pass  # failed, terminated, cancelled or timed out: described below
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            ended.append("past Temporal's retention")  # only the store knows it: long closed
            closed.set()
        return  # Temporal unreachable: follow the store as long as the user wants
    try:
        described = await handle.describe()
    except RPCError:
        ended.append("")  # closed, but how is not known: the line says only that it ended
    else:
        if described.status is not None and is_closed(described.status):
            ended.append(closed_as(described.status))
    closed.set()


class UserMessages:
    """The user's messages of a thread, each handed out once, when a step drains it."""

    def __init__(self, store: Store, thread_id: str) -> None:
        self._store = store
        self._thread_id = thread_id
        self._after = -1  # messages up to this position are shown or not the user's
        self._shown: set[str] = set()

    def drained_by(self, event: Event) -> list[str]:
        """The text of the user messages `event` took from the queue (none for other events)."""
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.type != "queue.changed" or payload.get("action") != "drained":
            return []
        # Drained messages join the draining turn, and a turn may drain more than once.
        drained = [
            m
            for m in self._store.messages.list(self._thread_id, after_position=self._after, depth=0)
            if m.role == "user" and m.turn_id == event.turn_id and m.id not in self._shown
        ]
        for message in drained:
            self._shown.add(message.id)
            self._after = max(self._after, message.position)
        return [m.content or "" for m in drained]
