"""Resuming a job at once after its cancel: the resume waits for the cancelled run to end
(its items' tasks cancelled and recorded) before it starts the next run, so every item
runs again and completes exactly once; a run that does not end in time is a clear error."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from support import StartWorker, add_script, agent_definitions, store_of, until
from temporalio.client import Client

from weft.client.jobs import JobError, Jobs
from weft.contract.jobs import item_id_of
from weft.workers.scripted_model import ScriptedModelServer


def _script(count: int, **reply: Any) -> dict[str, Any]:
    """Answers `item N` with `answer N`."""
    return {
        "turns": [
            {"match": f"regex:^item {n}$", "replies": [{"text": f"answer {n}", **reply}]}
            for n in range(count)
        ]
    }


async def _jobs(
    start_worker: StartWorker, client: Client, server: ScriptedModelServer, count: int
) -> tuple[Jobs, str]:
    """Jobs on a worker whose model is slow (60 s a reply) until the script is changed."""
    name = add_script(server, _script(count, delay_ms=60_000))
    worker = await start_worker(agent_definitions(name))
    return Jobs(client, store_of(worker), task_queue=worker.task_queue), name


async def test_resume_at_once_after_cancel_runs_every_item_once(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """Two items running on a slow model and one pending; cancel, and resume at once
    while the running items' tasks are still being cancelled: the resume waits for the
    cancelled run to end, then every item completes exactly once, the cancelled ones by
    a second attempt of the same task."""
    jobs, name = await _jobs(start_worker, temporal_client, scripted_server, 3)
    created = await jobs.create("helper", [f"item {n}" for n in range(3)], concurrency=2)
    job_id = created.job_id
    await until(lambda: jobs.get(job_id).counts.running == 2, "two items run")
    await jobs.cancel(job_id, "enough")
    scripted_server.set_script(name, _script(3))  # answers at once from now on
    resumed = await jobs.resume(job_id, "go on")  # at once: the cancel is still under way
    assert resumed.status in ("running", "cancelled")
    done = await asyncio.wait_for(jobs.wait(job_id), timeout=60)
    assert done.status == "completed", done
    assert done.counts.completed == 3 and done.counts.failed == done.counts.cancelled == 0
    events = jobs.events(job_id)
    completions = Counter(
        e.to_wire()["jobItemId"] for e in events if e.type == "job.item.completed"
    )
    assert completions == Counter({item_id_of(job_id, n): 1 for n in range(3)})
    types = [e.type for e in events]
    # The cancelled run ended (job.cancelled) before the resumed run began.
    assert types.index("job.cancelled") < types.index("job.started", types.index("job.cancelled"))
    for item in jobs.items(job_id):
        assert item.output is not None and item.output.response == f"answer {item.index}"
        task = jobs._store.tasks.get(item.task_id)
        assert task is not None and task.status == "completed"
        statuses = [a.status for a in task.attempts]
        assert statuses in (["completed"], ["cancelled", "completed"]), (item.index, statuses)
    cancelled = [i for i in jobs.items(job_id) if i.launches == 2]
    assert len(cancelled) == 2, "the two items running at the cancel ran again"


async def test_resume_of_a_running_job_is_refused_at_once(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """A job running with no cancel asked is not resumable: refused without waiting."""
    jobs, _ = await _jobs(start_worker, temporal_client, scripted_server, 1)
    created = await jobs.create("helper", ["item 0"], concurrency=1)
    await until(lambda: jobs.get(created.job_id).counts.running == 1, "the item runs")
    with pytest.raises(JobError, match="only a cancelled or failed job"):
        await asyncio.wait_for(jobs.resume(created.job_id), timeout=5)
    await jobs.cancel(created.job_id)
    await asyncio.wait_for(jobs.wait(created.job_id), timeout=60)


async def test_a_run_that_does_not_end_in_time_is_a_clear_error(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """When the cancelled run has not ended within the wait, the resume says so and
    starts nothing; resumed again once it ended, the job runs."""
    jobs, name = await _jobs(start_worker, temporal_client, scripted_server, 1)
    created = await jobs.create("helper", ["item 0"], concurrency=1)
    job_id = created.job_id
    await until(lambda: jobs.get(job_id).counts.running == 1, "the item runs")
    await jobs.cancel(job_id)
    with pytest.raises(JobError, match=f"job {job_id}'s last run has not ended"):
        await jobs.resume(job_id, wait_seconds=0.001)
    ended = await asyncio.wait_for(jobs.wait(job_id), timeout=60)
    assert ended.status == "cancelled"
    scripted_server.set_script(name, _script(1))
    await jobs.resume(job_id)
    done = await asyncio.wait_for(jobs.wait(job_id), timeout=60)
    assert done.status == "completed"
