"""The `code.run` activity under temporalio's ActivityEnvironment, including cancellation."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.testing import ActivityEnvironment

from weft.activities.code_run import CodeRunActivities
from weft.activities.sandbox import SandboxPool
from weft.activities.sandbox._pool import WorkerProcess
from weft.contract.code import CodeRunInput


async def test_activity_runs_code_and_heartbeats(pool: SandboxPool) -> None:
    """The activity returns a JSON-safe result and heartbeats while the code runs."""
    env = ActivityEnvironment()
    beats: list[object] = []
    env.on_heartbeat = lambda *details: beats.append(details)
    acts = CodeRunActivities(pool, heartbeat_interval_s=0.01)
    source = "let i = 0; while (i < 3e6) i++; report('x'); export default new Uint8Array([1, 2]);"
    result = await env.run(acts.run, CodeRunInput(source=source))
    assert (result.status, result.result, result.reports) == ("success", [1, 2], ["x"])
    assert beats
    assert result.model_dump(mode="json", by_alias=True)["durationMs"] > 0


async def test_activity_cancellation_terminates_the_sandbox(
    pool: SandboxPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Temporal cancellation of the activity terminates the run in the sandbox."""
    killed: list[int] = []
    discard = pool.discard

    def discard_and_record(worker: WorkerProcess) -> None:
        killed.append(worker.pid)
        discard(worker)

    monkeypatch.setattr(pool, "discard", discard_and_record)
    env = ActivityEnvironment()
    acts = CodeRunActivities(pool, heartbeat_interval_s=0.01)
    task = asyncio.ensure_future(env.run(acts.run, CodeRunInput(source="while (true) {}")))
    await asyncio.sleep(0.1)
    env.cancel()
    try:
        await asyncio.wait_for(task, 10)
        raise AssertionError("the activity should raise CancelledError")
    except asyncio.CancelledError:
        pass
    assert len(killed) == 1  # terminate() killed the worker running the loop
    follow_up = await ActivityEnvironment().run(acts.run, CodeRunInput(source="export default 1"))
    assert follow_up.result == 1
