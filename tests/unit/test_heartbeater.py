"""Heartbeater beats on event-loop timers inside the activity's context, and never after
the activity's block has left it."""

from __future__ import annotations

import asyncio
import dataclasses

from temporalio.testing import ActivityEnvironment

from weft.activities.streaming import Heartbeater


async def _beats_of(wait_first: bool, *, local: bool = False) -> tuple[int, int, int]:
    """Beats seen at once, by the end of the block, and a while after it."""
    beats: list[tuple[object, ...]] = []
    environment = ActivityEnvironment()
    environment.info = dataclasses.replace(environment.info, is_local=local)
    environment.on_heartbeat = lambda *details: beats.append(details)

    async def work() -> tuple[int, int]:
        async with Heartbeater(every=0.02, wait_first=wait_first):
            at_once = len(beats)
            if local:
                await asyncio.sleep(0.1)  # five intervals: none beats
            while not local and len(beats) < 3:  # the beats keep coming while it runs
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


async def test_a_local_activity_never_beats():
    """A quick tool's `tool.call` runs as a local activity, which has no heartbeat."""
    assert await asyncio.wait_for(_beats_of(wait_first=False, local=True), 5) == (0, 0, 0)
