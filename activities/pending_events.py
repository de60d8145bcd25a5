"""Events an activity owes the store, written with its final commit when it ends quickly.

A step activity used to commit its start markers (the workflow's outbox, `model.requested`,
`tool.started`) before its work began, and its result after: two write transactions where
most calls need one. Each costs about a millisecond of worker time, more under load. Now
the markers wait here and go to the store in whichever comes first:

- the activity's own final write (`take`), for a call that ends within `within` seconds;
- a background write `within` seconds after the activity began, so a live tail still
  shows a slow call as started;
- `flush`, which the activity calls before anything else it writes for the thread (a
  streamed batch, a tool's own event), so the thread's events keep their order.

Nothing is lost when the worker dies first: the workflow carries its outbox again when
an activity fails, and a retried attempt writes its own markers. A failed attempt that
ends by an exception still writes what it owed (best effort) so its markers are seen.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from types import TracebackType

from weft.activities.background import stop
from weft.contract.events import Event
from weft.store.protocols import HasEvents

logger = logging.getLogger(__name__)

# How long start markers may wait for the final write: a tail sees a call as started at
# most this late (a model's first streamed batch brings them sooner), and a call shorter
# than this commits once. Under load a quick call's activity takes a few hundred ms, so a
# shorter wait would add back the write it saves (bench/bench_load_compare.py).
DEFAULT_WITHIN_SECONDS = 0.5


class PendingEvents:
    """Events kept in order until a flush, the background write, or `take`."""

    def __init__(
        self,
        store: HasEvents,
        events: Sequence[Event] = (),
        *,
        within: float = DEFAULT_WITHIN_SECONDS,
    ) -> None:
        self._store = store
        self._events = list(events)
        self._within = within
        # Held across a write, so `take` never returns while an earlier write is in
        # flight: the caller's final write must be sequenced after it.
        self._lock = asyncio.Lock()
        self._taken = False
        # A timer, not a sleeping task, until the write is due: most calls end first, and
        # a cancelled timer costs nothing more (a task: a creation, a cancel and a wait).
        self._timer: asyncio.TimerHandle | None = None
        self._writer: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PendingEvents:
        if self._events:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._within, self._start_writer)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stop_timer()
        if exc is None or self._taken or not self._events:
            return
        try:
            await asyncio.shield(self.flush())
        except Exception:  # the workflow carries its outbox again; nothing is lost
            logger.warning("could not store a failed attempt's pending events", exc_info=True)

    def add(self, events: Sequence[Event]) -> None:
        """Queue more events after those pending (a stream's batch)."""
        if not events:
            return
        if self._taken:
            raise RuntimeError("events were added after the final write took them")
        self._events.extend(events)

    async def flush(self) -> list[Event]:
        """Write what is pending now, in one transaction; what this call wrote."""
        async with self._lock:
            if self._taken or not self._events:
                return []
            events, self._events = self._events, []
            try:
                await asyncio.to_thread(self._store.events.append, events)
            except BaseException:
                self._events[:0] = events  # still owed: the next write carries them
                raise
            return events

    async def take(self) -> list[Event]:
        """What is still pending, for the caller's final write; nothing is written after."""
        await self._stop_timer()
        async with self._lock:
            self._taken = True
            events, self._events = self._events, []
            return events

    def _start_writer(self) -> None:
        self._timer = None
        self._writer = asyncio.create_task(self._write_now())

    async def _write_now(self) -> None:
        try:
            # Shielded: a write under way finishes (and keeps the lock) even when `take`
            # stops the timer, so the final write is sequenced after it.
            await asyncio.shield(self.flush())
        except asyncio.CancelledError:
            raise
        except Exception:  # still pending: the final write carries them
            logger.warning("could not store a call's start events early", exc_info=True)

    async def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        writer, self._writer = self._writer, None
        await stop(writer)
