"""Eager activity dispatch, taken only while the worker keeps up (docs/recovery.md).

With eager dispatch, the reply to a workflow task that schedules an activity carries the
activity task itself. That saves a round trip through Temporal's matching service, and
about half of the server's work a step (docs/performance.md). But Temporal marks the
activity started as it replies, so the activity's heartbeat timeout runs from then, while
the task still travels: the server stores the workflow task's completion and replies, the
SDK hands the task to Python, and the event loop gets to it. With 200 threads on one
worker that took 0.13 s at the median and up to 2.2 s (an ordinary poll: 0.04 s, at most
0.7 s), against a heartbeat timeout of 3 s.

The SDK asks the activity slot supplier for a slot without waiting (`try_reserve_slot`)
before it asks Temporal for an eager task; refused, the activity goes through the
ordinary queue and is marked started only when this worker polls it. `EagerWhenResponsive`
hands out slots as the SDK's fixed-size supplier does, and refuses that request while:
- `StartDelays` says the activities that reached this worker lately took more than a
  share of their heartbeat timeout to get here from their start: the very clock an
  eager task's heartbeat timeout runs on, measured;
- `LoopLag` says the event loop runs late (a stall shows there before any task arrives);
- `EAGER_MAX_BUSY_SLOTS` slots are taken, which bounds what a burst takes before either
  shows.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from temporalio.worker import (
    CustomSlotSupplier,
    FixedSizeSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
    WorkerTuner,
)

from weft.workers.config import WorkerConfig

# How often the loop is sampled, and how fast an old delay stops counting: a one-second
# stall counts for about 0.7 s after it ended.
SAMPLE_SECONDS = 0.05
DECAY = 0.8
# A late arrival's share of its heartbeat timeout halves every this many seconds: long
# enough to span the next few workflow tasks, short enough that a worker that caught up
# soon takes eager tasks again.
DELAY_HALF_LIFE_SECONDS = 1.0
# No eager task while this many activity slots are taken (running, or reserved for a task
# on its way here, or for a poll): a burst of new threads can take many eager tasks before
# the first of them shows a delay. 64, counted only once running, let two `thread.init`
# attempts of a burst of 200 new threads on one worker time out.
EAGER_MAX_BUSY_SLOTS = 32
# The SDK's own defaults, kept when the activity slots are weft's.
WORKFLOW_TASK_SLOTS = ACTIVITY_SLOTS = LOCAL_ACTIVITY_SLOTS = NEXUS_SLOTS = 100


@dataclass(frozen=True)
class EagerGate:
    """The worker's slot tuner, the loop watch it needs running beside the worker (None
    when the loop's lag is not a limit), and the arrivals the activities report to."""

    tuner: WorkerTuner
    lag: LoopLag | None
    delays: StartDelays


def eager_gate(worker: WorkerConfig) -> EagerGate | None:
    """The gate for this worker's config; None when eager dispatch is off, or taken always
    (both limits null), so the SDK's own slots serve."""
    max_lag, max_share = worker.eager_max_loop_lag_ms, worker.eager_max_start_delay_share
    if not worker.eager_activities or (max_lag is None and max_share is None):
        return None
    lag = None if max_lag is None else LoopLag()
    delays = StartDelays()
    activities = EagerWhenResponsive(
        ACTIVITY_SLOTS,
        lag=lag,
        delays=delays,
        max_lag_seconds=None if max_lag is None else max_lag / 1000,
        max_delay_share=max_share,
    )
    tuner = WorkerTuner.create_composite(
        workflow_supplier=FixedSizeSlotSupplier(WORKFLOW_TASK_SLOTS),
        activity_supplier=activities,
        local_activity_supplier=FixedSizeSlotSupplier(LOCAL_ACTIVITY_SLOTS),
        nexus_supplier=FixedSizeSlotSupplier(NEXUS_SLOTS),
    )
    return EagerGate(tuner, lag, delays)


class LoopLag:
    """How late the worker's event loop runs what was due: a decaying recent maximum.

    Read from any thread (a float assignment is atomic under the GIL).
    """

    def __init__(self) -> None:
        self.seconds = 0.0

    def observe(self, late: float) -> None:
        self.seconds = max(late, self.seconds * DECAY)

    async def run(self) -> None:
        """Sample the running loop until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + SAMPLE_SECONDS
            await asyncio.sleep(SAMPLE_SECONDS)
            self.observe(max(0.0, loop.time() - due))


class StartDelays:
    """How late activities reached this worker's code after Temporal marked them started,
    as a share of their heartbeat timeout: a recent maximum that halves every
    `DELAY_HALF_LIFE_SECONDS`.

    The delay is the worker's clock against the server's `started_time`: a skewed clock
    shifts it. The recovery interceptor reports every activity; the slot supplier reads
    the share from any thread (stale by a moment at worst, never torn: each attribute is
    replaced whole under the GIL).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._share = 0.0
        self._at = clock()

    def observe(self, delay_seconds: float, heartbeat_timeout_seconds: float) -> None:
        share = max(0.0, delay_seconds) / heartbeat_timeout_seconds
        now = self._clock()
        self._share, self._at = max(share, self._decayed(now)), now

    @property
    def share(self) -> float:
        return self._decayed(self._clock())

    def _decayed(self, now: float) -> float:
        return self._share * float(0.5 ** ((now - self._at) / DELAY_HALF_LIFE_SECONDS))


class EagerWhenResponsive(CustomSlotSupplier):
    """`slots` activity slots; one for an eager task only while fewer than
    `EAGER_MAX_BUSY_SLOTS` are taken, the loop lags at most `max_lag_seconds` and lately
    arrived activities took at most `max_delay_share` of their heartbeat timeout (a limit
    of None is no limit)."""

    def __init__(
        self,
        slots: int,
        *,
        lag: LoopLag | None,
        delays: StartDelays,
        max_lag_seconds: float | None,
        max_delay_share: float | None,
    ) -> None:
        self._slots = self._free = slots
        # The loop's lag is read only when it is a limit.
        self._lag = lag if max_lag_seconds is not None else None
        self._max_lag = max_lag_seconds or 0.0
        self._delays = delays
        self._max_share = max_delay_share
        # The SDK may call from its own threads: the count is guarded by a thread lock, and
        # waiters are woken on their loop.
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        # What the SDK's no-wait requests got, for tests and benchmarks.
        self.refused_eager = self.granted_eager = 0

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._free > 0:
                    self._free -= 1
                    return SlotPermit()
                woken: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, woken))
            await woken  # then try again: another reservation may have taken the slot

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        with self._lock:
            if self._behind():
                self.refused_eager += 1
                return None
            if self._free > 0:
                self._free -= 1
                self.granted_eager += 1
                return SlotPermit()
        return None

    def _behind(self) -> bool:
        """Whether an eager task would likely wait here long enough to risk its heartbeat
        timeout (called under the lock)."""
        if self._slots - self._free >= EAGER_MAX_BUSY_SLOTS:
            return True
        if self._lag is not None and self._lag.seconds > self._max_lag:
            return True
        return self._max_share is not None and self._delays.share > self._max_share

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass  # a slot counts as taken from its reservation on

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        with self._lock:
            self._free += 1
            waiters, self._waiters = self._waiters, []
        for loop, woken in waiters:  # all of them: one may have been cancelled meanwhile
            loop.call_soon_threadsafe(_wake, woken)


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
