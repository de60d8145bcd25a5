"""Eager dispatch is taken only while the worker keeps up: the activity slot supplier
refuses the SDK's no-wait request while activities arrive late, the loop lags or many
activities run, and hands out and takes back slots as a fixed-size supplier does."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from temporalio.worker import SlotReleaseContext

from weft.workers.config import WorkerConfig
from weft.workers.eager_gate import (
    EAGER_MAX_BUSY_SLOTS,
    EagerWhenResponsive,
    LoopLag,
    StartDelays,
    eager_gate,
)

CTX: Any = SimpleNamespace(slot_type="activity", task_queue="q", is_sticky=False)


def released(supplier: EagerWhenResponsive, permit: Any) -> None:
    supplier.release_slot(SlotReleaseContext(slot_info=None, permit=permit))


def gate(
    slots: int,
    *,
    lag: LoopLag | None = None,
    delays: StartDelays | None = None,
    max_lag_seconds: float | None = None,
    max_delay_share: float | None = 0.25,
) -> EagerWhenResponsive:
    return EagerWhenResponsive(
        slots,
        lag=lag,
        delays=delays or StartDelays(),
        max_lag_seconds=max_lag_seconds,
        max_delay_share=max_delay_share,
    )


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_late_arrivals_stop_eager_tasks_until_the_worker_catches_up() -> None:
    """An activity that reached the worker 1.5 s after its start, of a 3 s heartbeat
    timeout: no eager task for a while; two half-lives later the share is below the limit."""
    clock = Clock()
    delays = StartDelays(clock)
    supplier = gate(4, delays=delays, max_delay_share=0.25)
    delays.observe(0.2, 3.0)  # on time
    assert supplier.try_reserve_slot(CTX) is not None
    delays.observe(1.5, 3.0)
    assert delays.share == 0.5
    assert supplier.try_reserve_slot(CTX) is None
    delays.observe(0.1, 3.0)  # one on-time arrival does not hide the late one
    assert supplier.try_reserve_slot(CTX) is None
    clock.now += 1.0  # one half-life
    assert delays.share == 0.25
    clock.now += 0.1
    assert supplier.try_reserve_slot(CTX) is not None
    assert supplier.refused_eager == 2


def test_a_clock_behind_the_servers_counts_as_on_time() -> None:
    delays = StartDelays(Clock())
    delays.observe(-0.4, 3.0)
    assert delays.share == 0.0


def test_a_lagging_loop_gets_no_eager_task_and_a_recovered_one_does() -> None:
    lag = LoopLag()
    supplier = gate(4, lag=lag, max_lag_seconds=0.02)
    assert supplier.try_reserve_slot(CTX) is not None
    lag.observe(1.5)  # a stall of 1.5 s
    assert supplier.try_reserve_slot(CTX) is None
    for _ in range(40):  # 40 samples on time: 2 s later
        lag.observe(0.0)
    assert lag.seconds < 0.02
    assert supplier.try_reserve_slot(CTX) is not None
    assert supplier.refused_eager == 1


async def test_no_eager_task_while_many_slots_are_taken() -> None:
    """Counted from the reservation on: a burst's eager tasks count before they arrive."""
    supplier = gate(100)
    permits = [supplier.try_reserve_slot(CTX) for _ in range(EAGER_MAX_BUSY_SLOTS - 1)]
    permits.append(await supplier.reserve_slot(CTX))  # a poll's slot counts too
    assert all(permits)
    assert supplier.try_reserve_slot(CTX) is None
    released(supplier, permits[0])
    assert supplier.try_reserve_slot(CTX) is not None


async def test_slots_are_counted_and_a_waiting_poller_is_woken_by_a_release() -> None:
    supplier = gate(2)
    first = await supplier.reserve_slot(CTX)
    second = await supplier.reserve_slot(CTX)
    assert supplier.try_reserve_slot(CTX) is None  # no slot left, eager or not
    third = asyncio.create_task(supplier.reserve_slot(CTX))
    await asyncio.sleep(0.05)
    assert not third.done()
    released(supplier, first)
    assert await asyncio.wait_for(third, 1) is not None
    released(supplier, second)
    assert supplier.try_reserve_slot(CTX) is not None


def test_a_limit_of_none_is_no_limit() -> None:
    delays = StartDelays(Clock())
    delays.observe(3.0, 3.0)
    lag = LoopLag()
    lag.observe(2.0)
    supplier = gate(4, lag=lag, delays=delays, max_lag_seconds=None, max_delay_share=None)
    assert supplier.try_reserve_slot(CTX) is not None


def test_the_config_picks_the_gate() -> None:
    """Off: no gate. On: late arrivals and the loop's lag limit it, and the loop is watched
    only when its lag is a limit. Both limits null: the SDK's own slots take every eager
    task."""
    assert eager_gate(WorkerConfig(eager_activities=False)) is None
    default = eager_gate(WorkerConfig(eager_activities=True))
    assert default is not None and default.lag is not None
    unwatched = eager_gate(WorkerConfig(eager_activities=True, eager_max_loop_lag_ms=None))
    assert unwatched is not None and unwatched.lag is None
    unlimited = WorkerConfig(
        eager_activities=True, eager_max_loop_lag_ms=None, eager_max_start_delay_share=None
    )
    assert eager_gate(unlimited) is None
