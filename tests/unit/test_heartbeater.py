"""Heartbeater beats on event-loop timers inside the activity's context, and never after
the activity's block has left it."""

from __future__ import annotations

import asyncio

from temporalio.testing import ActivityEnvironment

from weft.activities.streaming import Heartbeater


async def _beats_of(wait_first: bool) -> tuple[int, int, int]:
    """Beats seen at once, by the end of the block, and a while after it."""
    beats: list[tuple[object, ...]] = []
    environment = ActivityEnvironment()
    environment.on_heartbeat = lambda *details: beats.append(details)

    async def work() -> tuple[int, int]:
        async with Heartbeater(every=0.02, wait_first=wait_first):
            at_once = len(beats)
            while len(beats) < 3:  # the beats keep coming while the work runs
                await asyncio.sleep(0.01)
            return at_once, len(beats)

    at_once, inside = await environment.run(work)
    await asyncio.sleep(0.1)  # five intervals: a timer left behind would beat again
    return at_once, inside, len(beats)


async def test_it_beats_while_the_block_runs_and_stops_when_it_ends():
    at_once, inside, after = await asyncio.wait_for(_beats_of(wait_first=False), 5)
    assert at_once == 1
    assert after == inside >= 3


async def test_wait_first_beats_only_after_an_interval():
    at_once, inside, after = await asyncio.wait_for(_beats_of(wait_first=True), 5)
    assert at_once == 0
    assert after == inside >= 3
