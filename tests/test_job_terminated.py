"""A job whose run is terminated through Temporal (not `cancel`) writes no end of its own:
the readers that ask Temporal (`Jobs.show`, `list_checked`, `wait`, GET /jobs and
/jobs/{id}) record the end Temporal states, once, as the job's other ends are recorded;
a resume waits for the tasks the closed run left running, then runs every item again."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from api_support import api_stack, get_until
from support import (
    StartWorker,
    add_script,
    agent_definitions,
    assert_terminated_through_temporal,
    event_schema_validator,
    store_of,
    until,
)
from temporalio.client import Client

from weft.client.jobs import JobError, Jobs
from weft.client.tasks import Tasks
from weft.contract.jobs import JobItem
from weft.store import Store
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

_ENDS = ("job.completed", "job.failed", "job.cancelled")


def _script(count: int, **reply: Any) -> dict[str, Any]:
    """Answers `item N` with `answer N`."""
    return {
        "turns": [
            {"match": f"regex:^item {n}$", "replies": [{"text": f"answer {n}", **reply}]}
            for n in range(count)
        ]
    }


def _running(jobs: Jobs, job_id: str) -> Callable[[], bool]:
    return lambda: jobs.get(job_id).counts.running == 1


def _ends(jobs: Jobs, job_id: str) -> list[dict[str, Any]]:
    """The job's end events, each checked against the vendored event schema."""
    validator = event_schema_validator()
    ends = [e.to_wire() for e in jobs.events(job_id) if e.type in _ENDS]
    for end in ends:
        validator.validate(end)
    return ends


async def test_a_job_terminated_through_temporal_is_recorded_failed_once(
    start_worker: StartWorker,
    temporal_client: Client,
    weft_config: WeftConfig,
    scripted_server: ScriptedModelServer,
) -> None:
    """Two jobs on a slow model, each terminated through Temporal: one read by
    `Jobs.show`, the other listed by GET /jobs. Each is then `failed` with Temporal's
    reason, in the store, `show`, `wait` and both routes, with one `job.failed`
    however often it is read."""
    name = add_script(scripted_server, _script(2, delay_ms=60_000))
    worker = await start_worker(agent_definitions(name))
    jobs = Jobs(temporal_client, store_of(worker), task_queue=worker.task_queue)
    shown = (await jobs.create("helper", ["item 0"], concurrency=1)).job_id
    listed = (await jobs.create("helper", ["item 1"], concurrency=1)).job_id
    for job_id in (shown, listed):
        await until(_running(jobs, job_id), "the item runs")
        await temporal_client.get_workflow_handle(job_id).terminate(reason="stuck on a deploy")
    assert jobs.get(shown).status == "running"  # the run wrote nothing: the store can't know

    first = await jobs.show(shown)
    assert_terminated_through_temporal(first, "stuck on a deploy")
    async with api_stack(
        temporal_client, weft_config, worker.task_queue, store=store_of(worker)
    ) as stack:
        page = await get_until(
            stack.http,
            "/jobs",
            lambda jobs: any(j["jobId"] == listed and j["status"] == "failed" for j in jobs),
        )
        by_id = {j["jobId"]: j for j in page}
        assert "stuck on a deploy" in by_id[listed]["reason"]
        one = await stack.http.get(f"/jobs/{shown}")
        assert one.status_code == 200 and one.json()["status"] == "failed", one.text
    assert (await jobs.wait(shown)).status == "failed"
    assert [j.status for j in await jobs.list_checked() if j.job_id in (shown, listed)] == [
        "failed",
        "failed",
    ]
    for job_id in (shown, listed):
        ends = _ends(jobs, job_id)
        assert [e["type"] for e in ends] == ["job.failed"], ends
        payload = ends[0]["payload"]
        assert payload["closedAs"] == "terminated" and "stuck on a deploy" in payload["reason"]
        assert payload["counts"]["running"] == 1
        # The item's task was abandoned by the closed run, not closed: it runs on.
        item = next(jobs.items(job_id))
        assert item.status == "running"
        task = store_of(worker).tasks.get(item.task_id)
        assert task is not None and task.status == "running"


@dataclass
class TerminatedJob:
    """A job of two items on a slow model whose run was terminated through Temporal while
    its first item ran (that item's task runs on)."""

    script: str
    store: Store
    task_queue: str
    jobs: Jobs
    job_id: str
    running: JobItem


async def _terminated_job(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> TerminatedJob:
    name = add_script(scripted_server, _script(2, delay_ms=60_000))
    worker = await start_worker(agent_definitions(name))
    store = store_of(worker)
    jobs = Jobs(temporal_client, store, task_queue=worker.task_queue)
    job_id = (await jobs.create("helper", ["item 0", "item 1"], concurrency=1)).job_id
    await until(lambda: jobs.get(job_id).counts.running == 1, "the first item runs")
    running = next(i for i in jobs.items(job_id) if i.status == "running")
    await temporal_client.get_workflow_handle(job_id).terminate(reason="by hand")
    return TerminatedJob(name, store, worker.task_queue, jobs, job_id, running)


async def _resumed_to_completion(job: TerminatedJob, scripted_server: ScriptedModelServer) -> None:
    """Resume the job on a model that answers at once; it completes every item."""
    scripted_server.set_script(job.script, _script(2))
    await job.jobs.resume(job.job_id, "go on")
    done = await asyncio.wait_for(job.jobs.wait(job.job_id), timeout=60)
    assert done.status == "completed", done
    outputs = [i.output.response for i in job.jobs.items(job.job_id) if i.output]
    assert outputs == ["answer 0", "answer 1"]


async def test_a_terminated_job_resumes_once_its_tasks_have_ended(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """A resume of a terminated job is refused while the closed run's tasks still run
    (naming them); once they are cancelled it runs every item again, to completion."""
    job = await _terminated_job(start_worker, temporal_client, scripted_server)
    jobs, job_id, running = job.jobs, job.job_id, job.running
    with pytest.raises(JobError, match=f"still running \\({running.task_id}\\)"):
        await jobs.resume(job_id)
    assert jobs.get(job_id).status == "failed"  # the resume's read recorded the end
    tasks = Tasks(temporal_client, job.store, task_queue=job.task_queue)
    await tasks.cancel(running.task_id, "its job was terminated")
    await asyncio.wait_for(tasks.wait(running.task_id), timeout=60)
    await _resumed_to_completion(job, scripted_server)
    assert [e["type"] for e in _ends(jobs, job_id)] == ["job.failed", "job.completed"]


async def test_a_resume_records_the_ends_of_tasks_terminated_by_hand(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """A job and then its running item's task, both terminated through Temporal: the
    resume itself records the task's end (nothing read the task in between) and runs
    every item again, to completion."""
    job = await _terminated_job(start_worker, temporal_client, scripted_server)
    task_id = job.running.task_id
    await temporal_client.get_workflow_handle(task_id).terminate(reason="its job was terminated")
    task = job.store.tasks.get(task_id)
    assert task is not None and task.status == "running"  # its run wrote no end
    await _resumed_to_completion(job, scripted_server)
    # The resume recorded the closed run's end before it retried the task, which then
    # completed with its item.
    kinds = [(e.type, (e.payload or {}).get("reason")) for e in job.store.tasks.events(task_id)]
    failed = [reason for kind, reason in kinds if kind == "task.failed"]
    assert len(failed) == 1 and str(failed[0]).endswith(": its job was terminated"), kinds
    assert kinds[-1][0] == "task.completed", kinds
