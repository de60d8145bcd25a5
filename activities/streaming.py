"""Streaming helpers for long activities: batched delta events and a heartbeat loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Protocol

from temporalio import activity

from weft.activities.pending_events import PendingEvents
from weft.activities.providers import Delta
from weft.contract.events import Event
from weft.store import Store


class EventMaker(Protocol):
    """Builds batch `n` of one kind; tool-call arguments also name the call's `index`."""

    def __call__(
        self, n: int, text: str, kind: str, index: int | None = None, call_id: str | None = None
    ) -> Event: ...


def delta_event(
    kind: str, text: str, attempt: int, index: int | None = None
) -> tuple[str, dict[str, Any]]:
    """The event type and payload of one batch of `kind`.

    Reasoning is its own Agent Runtime class (`reasoning.delta`), outside the final text;
    a tool call's streamed arguments are `tool.args`, one batch per call (`toolCallIndex`
    is its place among the reply's tool calls, and the envelope's `toolCallId` its id:
    providers name the call before its arguments); text is `model.delta`.
    """
    if kind == "reasoning":
        return "reasoning.delta", {"text": text, "attempt": attempt}
    if kind == "tool_call":
        return "tool.args", {"text": text, "toolCallIndex": index or 0, "attempt": attempt}
    return "model.delta", {"text": text, "kind": kind, "attempt": attempt}


class DeltaBatcher:
    """Collects streamed text and writes one delta event per kind per interval.

    One write per token would make the store the bottleneck; about 100 ms batches keep
    a live tail smooth at a few writes a second. The call's start events wait in the same
    queue (`PendingEvents`): the first batch written brings them, and a reply that ends
    before any batch was due is stored with them by the call's one final write (`take`).

    With `after` (the step's own write, made beside the request), nothing is written or
    handed to the final write before it has committed, the start events only then join
    the queue, and nothing at all is written when it failed.
    """

    def __init__(
        self,
        store: Store,
        make_event: EventMaker,
        *,
        interval: float = 0.1,
        lead: Sequence[Event] = (),
        after: asyncio.Future[Any] | None = None,
    ) -> None:
        self._make_event = make_event
        self._interval = interval
        # Keyed by kind, and by call for tool-call arguments (several may interleave).
        self._parts: dict[tuple[str, int | None], list[str]] = {}
        self._call_ids: dict[int, str] = {}  # a tool call's id by its index, once named
        self._last = time.monotonic()
        self._count = 0
        self._after = after
        self._held = list(lead) if after is not None else []
        self._pending = PendingEvents(store, () if after is not None else lead)

    async def __aenter__(self) -> DeltaBatcher:
        await self._pending.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._committed()
        except Exception:  # the attempt fails by it: nothing of the reply is written
            self._parts = {}
        else:
            self._pending.add(self._batches())
        finally:
            await self._pending.__aexit__(exc_type, exc, tb)

    async def add(self, delta: Delta) -> None:
        """Take one delta; write a batch when the interval has passed."""
        index = delta.tool_call_index if delta.kind == "tool_call" else None
        self._parts.setdefault((delta.kind, index), []).append(delta.text)
        if index is not None and delta.tool_call_id:
            self._call_ids[index] = delta.tool_call_id
        if time.monotonic() - self._last >= self._interval:
            await self.flush()

    async def flush(self) -> None:
        """Write what is pending, if anything, and heartbeat."""
        self._last = time.monotonic()
        await self._committed()
        self._pending.add(self._batches())
        if await self._pending.flush():
            activity.heartbeat(self._count)

    async def take(self) -> list[Event]:
        """What is not stored yet (start events, the last batches), in order, for the
        call's final write; nothing is written after."""
        await self._committed()
        self._pending.add(self._batches())
        return await self._pending.take()

    async def _committed(self) -> None:
        """Wait for the step's own write, if one is under way (raising its error); then
        the start events it held back join the queue."""
        if self._after is None:
            return
        await asyncio.shield(self._after)
        self._after = None
        self._pending.add(self._held)
        self._held = []

    def _batches(self) -> list[Event]:
        events = []
        for (kind, index), parts in self._parts.items():
            self._count += 1
            text = "".join(parts)
            if index is None:
                events.append(self._make_event(self._count, text, kind))
            else:
                call_id = self._call_ids.get(index)
                events.append(self._make_event(self._count, text, kind, index, call_id))
        self._parts = {}
        return events


class Heartbeater:
    """Heartbeats in the background so a silent provider still lets cancellation arrive.

    The beats are event-loop timers, not a task: every model and tool call holds one or two
    heartbeaters, and a task that sleeps costs a creation, a cancellation and a wait when
    the call ends (about 50 µs a call, measured), where a timer costs a cancel.
    """

    def __init__(self, *, every: float = 1.0, wait_first: bool = False) -> None:
        self._every = every
        # Waiting an interval before the first beat spares an activity shorter than that
        # a heartbeat of its own (the worker's wrapper around every activity does so).
        self._wait_first = wait_first
        self._timer: asyncio.TimerHandle | None = None

    async def __aenter__(self) -> Heartbeater:
        if activity.info().is_local:
            return self  # a local activity has no heartbeat (a quick tool's `tool.call`)
        if self._wait_first:
            self._next()
        else:
            self._beat()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _beat(self) -> None:
        # Runs in the context the timer was set in: the activity's own.
        activity.heartbeat()
        self._next()

    def _next(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._every, self._beat)
