"""`weft thread tail ID`: follow a thread's events from the store, as a transcript or JSON.

Events do not carry what the user sent (the queue events name entries, not their text), so
the transcript reads the user's messages from the store when a step takes them from the
queue: the step's `queue.changed` "drained" event is written in one commit with the
messages it drained, so they are there when the event is.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from weft.activities.store import Store
from weft.cli.render import TranscriptPrinter
from weft.client.threads import tail_events
from weft.contract.events import Event
from weft.workers.config import WeftConfig


def register(actions: Any) -> None:
    """Add `tail` to the `weft thread` subcommands."""
    tail = actions.add_parser("tail", help="follow a thread's events (streams model text)")
    tail.add_argument("thread_id")
    tail.add_argument("--after", type=int, default=0, help="start after this sequence")
    tail.add_argument("--json", action="store_true", help="print raw events as JSON lines")
    tail.add_argument("--no-follow", action="store_true", help="stop at the end of the log")
    # It reads the store: a closed thread's events are still there.
    tail.set_defaults(handler=run, closed_ok=True)


async def run(args: argparse.Namespace, config: WeftConfig) -> int:
    """Print the events until interrupted (or the end of the log with --no-follow)."""
    store = await asyncio.to_thread(Store.open, config.store_url())
    printer = TranscriptPrinter(sys.stdout)
    users = UserMessages(store, args.thread_id)
    try:
        async for event in tail_events(
            store, args.thread_id, after=args.after, follow=not args.no_follow
        ):
            if args.json:
                print(json.dumps(event.to_wire()), flush=True)
                continue
            for text in await asyncio.to_thread(users.drained_by, event):
                printer.user(text)
            printer.show(event)
    finally:
        store.close()
    return 0


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
