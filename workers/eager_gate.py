"""Eager activity dispatch, taken only while the worker keeps up (docs/recovery.md).

With eager dispatch, the reply to a workflow task that schedules an activity carries the
activity task itself. That saves a round trip through Temporal's matching service, about
3 ms an activity on the development machine. But Temporal marks the activity started as
it replies, so the activity's heartbeat timeout runs from then. On a saturated worker
the event loop took seconds to get to such a task (p99 3.5 s at 200 threads), and live
calls were timed out and ran again.

The SDK asks the activity slot supplier for a slot without waiting (`try_reserve_slot`)
before it asks Temporal for an eager task; refused, the activity goes through the
ordinary queue and is marked started only when this worker polls it. `EagerWhenResponsive`
hands out slots as the SDK's fixed-size supplier does, and refuses that request while
`LoopLag` says the event loop runs late or `EAGER_MAX_RUNNING` activities run.

Under load on PostgreSQL it still let live calls time out (docs/recovery.md), so eager
dispatch stays opt-in (`worker.eagerActivities`); this gate applies when it is on.
"""

from __future__ import annotations

import asyncio
import threading
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
# No eager task while this many activities run here: a burst of new threads can saturate
# the loop faster than its lag shows it, and this bounds what a burst takes eagerly.
EAGER_MAX_RUNNING = 16
# The SDK's own defaults, kept when the activity slots are weft's.
WORKFLOW_TASK_SLOTS = ACTIVITY_SLOTS = LOCAL_ACTIVITY_SLOTS = NEXUS_SLOTS = 100


@dataclass(frozen=True)
class EagerGate:
    """The worker's slot tuner, and the loop watch it needs running beside the worker."""

    tuner: WorkerTuner
    lag: LoopLag


def eager_gate(worker: WorkerConfig) -> EagerGate | None:
    """The gate for this worker's config; None when eager dispatch is off, or taken always
    (`eager_max_loop_lag_ms: null`), so the SDK's own slots serve."""
    if not worker.eager_activities or worker.eager_max_loop_lag_ms is None:
        return None
    lag = LoopLag()
    activities = EagerWhenResponsive(
        ACTIVITY_SLOTS, lag, max_lag_seconds=worker.eager_max_loop_lag_ms / 1000
    )
    tuner = WorkerTuner.create_composite(
        workflow_supplier=FixedSizeSlotSupplier(WORKFLOW_TASK_SLOTS),
        activity_supplier=activities,
        local_activity_supplier=FixedSizeSlotSupplier(LOCAL_ACTIVITY_SLOTS),
        nexus_supplier=FixedSizeSlotSupplier(NEXUS_SLOTS),
    )
    return EagerGate(tuner, lag)


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


class _Permit(SlotPermit):
    """A slot; `used` once a task took it."""

    def __init__(self) -> None:
        self.used = False


class EagerWhenResponsive(CustomSlotSupplier):
    """`slots` activity slots; one for an eager task only while the loop lags less than
    `max_lag_seconds` and fewer than `EAGER_MAX_RUNNING` activities run."""

    def __init__(self, slots: int, lag: LoopLag, *, max_lag_seconds: float) -> None:
        self._free = slots
        self._running = 0  # slots with a task, of those handed out
        self._lag = lag
        self._max_lag = max_lag_seconds
        # The SDK may call from its own threads: the count is guarded by a thread lock, and
        # waiters are woken on their loop.
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.refused_eager = 0

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        loop = asyncio.get_running_loop()
        while True:
            with self._lock:
                if self._free > 0:
                    self._free -= 1
                    return _Permit()
                woken: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, woken))
            await woken  # then try again: another reservation may have taken the slot

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        with self._lock:
            if self._lag.seconds > self._max_lag or self._running >= EAGER_MAX_RUNNING:
                self.refused_eager += 1
                return None
            if self._free > 0:
                self._free -= 1
                return _Permit()
        return None

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        with self._lock:
            self._running += 1
            if isinstance(ctx.permit, _Permit):
                ctx.permit.used = True

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        with self._lock:
            self._free += 1
            if isinstance(ctx.permit, _Permit) and ctx.permit.used:
                self._running -= 1
            waiters, self._waiters = self._waiters, []
        for loop, woken in waiters:  # all of them: one may have been cancelled meanwhile
            loop.call_soon_threadsafe(_wake, woken)


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
