"""What the parts of one ThreadState share: the store, the call's ids, its intents, its writes.

Each part (values, messages, files, effects, …) is built over one `ThreadScope` and keeps
its own state; the scope is the only thing they have in common. Event and intent ids are
numbered per kind here, at the call (`number`), so a retried tool that does the same
things in the same order makes the same ids, and the store or workflow takes them once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from weft.activities.clock import now_iso
from weft.activities.thread_intents import IntentSink
from weft.activities.thread_writes import ThreadWrites
from weft.contract.events import Event
from weft.store import Store

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class ThreadScope:
    """One call's view of its thread: where it reads and writes, and under which ids."""

    store: Store
    thread_id: str
    session_id: str | None
    turn_id: str | None
    tool_call_id: str | None
    # Names the events and ids this call makes: unique in the thread per call.
    event_prefix: str
    intents: IntentSink
    writes: ThreadWrites = field(default_factory=ThreadWrites)
    counts: Counter[str] = field(default_factory=Counter)

    def number(self, kind: str) -> int:
        """The next number of `kind` in this call (1, 2, …): ids that repeat on a retry."""
        self.counts[kind] += 1
        return self.counts[kind]

    def event(self, event_type: str, suffix: str, payload: dict[str, Any]) -> Event:
        """An event of this call, its id unique per call and kind of write."""
        return Event(
            type=event_type,
            event_id=f"{self.event_prefix}:{suffix}",
            timestamp=now_iso(),
            thread_id=self.thread_id,
            session_id=self.session_id,
            turn_id=self.turn_id,
            tool_call_id=self.tool_call_id,
            payload=payload,
        )

    async def write(self, write: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking store write, after what the running call owes (thread_writes.py)."""
        return await self.writes.write(write, *args, **kwargs)

    async def append(self, events: Sequence[Event]) -> None:
        """Write `events` for the thread, after what the running call owes."""
        await self.write(self.store.events.append, list(events))

    async def read(self, read: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking store read, off the event loop."""
        return await asyncio.to_thread(read, *args, **kwargs)

    async def write_unordered(self, write: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking store write that does not wait for what the call owes (no event)."""
        return await asyncio.to_thread(write, *args, **kwargs)

    def nested(self, call_id: str) -> ThreadScope:
        """The scope of a tool this call invokes: ids of its own (`call_id`), intents of its
        own (joined to this call's by the invoker), the same write path."""
        return ThreadScope(
            store=self.store,
            thread_id=self.thread_id,
            session_id=self.session_id,
            turn_id=self.turn_id,
            tool_call_id=call_id,
            event_prefix=call_id,
            intents=self.intents.nested(),
            writes=self.writes,
        )
