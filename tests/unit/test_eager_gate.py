"""Eager dispatch is taken only while the worker keeps up: the activity slot supplier
refuses the SDK's no-wait request when the loop lags or many activities run, and hands out
and takes back slots as a fixed-size supplier does."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from temporalio.worker import SlotReleaseContext

from weft.workers.eager_gate import EAGER_MAX_RUNNING, EagerWhenResponsive, LoopLag

CTX: Any = SimpleNamespace(slot_type="activity", task_queue="q", is_sticky=False)


def used(supplier: EagerWhenResponsive, permit: Any) -> None:
    supplier.mark_slot_used(SimpleNamespace(slot_info=None, permit=permit))  # type: ignore[arg-type]


def released(supplier: EagerWhenResponsive, permit: Any) -> None:
    supplier.release_slot(SlotReleaseContext(slot_info=None, permit=permit))


def test_a_lagging_loop_gets_no_eager_task_and_a_recovered_one_does() -> None:
    lag = LoopLag()
    supplier = EagerWhenResponsive(4, lag, max_lag_seconds=0.02)
    assert supplier.try_reserve_slot(CTX) is not None
    lag.observe(1.5)  # a stall of 1.5 s
    assert supplier.try_reserve_slot(CTX) is None
    for _ in range(40):  # 40 samples on time: 2 s later
        lag.observe(0.0)
    assert lag.seconds < 0.02
    assert supplier.try_reserve_slot(CTX) is not None
    assert supplier.refused_eager == 1


def test_no_eager_task_while_many_activities_run() -> None:
    supplier = EagerWhenResponsive(100, LoopLag(), max_lag_seconds=0.02)
    permits = [supplier.try_reserve_slot(CTX) for _ in range(EAGER_MAX_RUNNING)]
    for permit in permits:
        used(supplier, permit)
    assert supplier.try_reserve_slot(CTX) is None
    released(supplier, permits[0])
    assert supplier.try_reserve_slot(CTX) is not None


async def test_slots_are_counted_and_a_waiting_poller_is_woken_by_a_release() -> None:
    supplier = EagerWhenResponsive(2, LoopLag(), max_lag_seconds=0.02)
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
