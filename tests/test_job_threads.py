"""A job may belong to a thread: `Jobs.create(thread_id=)`, `weft job run --thread`, the
HTTP body's `threadId`. It is stored on the job (and stated by its `job.created`), takes
the thread's tenant, and an unknown thread or another tenant's is refused the same way
(over HTTP the 404 of an unknown thread). The thread's `subagent_job_summary` lists its
jobs with their items by status and whether each can still make progress."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import yaml
from api_support import api_stack
from support import add_script, agent_definitions, until, weft_cli

from weft.cli.subagents_command import render
from weft.client.jobs import Jobs
from weft.client.threads import Threads
from weft.contract.jobs import JobRecord, JobThreadNotFound
from weft.contract.subagent_summary import job_recoverability

SCRIPT = {
    "turns": [
        {"match": f"regex:^item {n}$", "replies": [{"text": f"answer {n}"}]} for n in range(3)
    ]
    + [{"match": "*", "replies": [{"text": "hi"}]}]
}
DONE = {"total": 2, "pending": 0, "running": 0, "completed": 2, "failed": 0, "cancelled": 0}


async def test_a_threads_jobs_are_in_its_summary(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    store = worker.store
    assert store is not None
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    jobs = Jobs(temporal_client, store, task_queue=worker.task_queue)
    thread = await threads.start("helper", tenant="acme")

    # Unknown, or another tenant's: refused alike, before anything is stored.
    for thread_id, tenant in (("thread-unknown", None), (thread.id, "globex")):
        with pytest.raises(JobThreadNotFound) as refused:
            await jobs.create("helper", ["item 0"], thread_id=thread_id, tenant=tenant)
        assert str(refused.value) == f"threadId: no thread {thread_id!r}"
    assert jobs.list(tenant="globex") == [] and jobs.list() == []

    job = await jobs.create("helper", ["item 0", "item 1"], thread_id=thread.id)
    assert (job.thread_id, job.tenant) == (thread.id, "acme")  # the thread's tenant
    (created,) = [e for e in jobs.events(job.job_id) if e.type == "job.created"]
    assert created.payload["job"]["threadId"] == thread.id  # stated by the log
    ended = await asyncio.wait_for(jobs.wait(job.job_id), timeout=60)
    assert ended.status == "completed", ended
    await until(lambda: store.threads.get(thread.id), "the thread's row")

    summary = await threads.subagent_summary(thread.id)
    assert summary is not None and summary.jobs.linked
    (entry,) = summary.jobs.items
    assert (entry.job_id, entry.thread_id, entry.status) == (job.job_id, thread.id, "completed")
    assert entry.progress == DONE and summary.jobs.counts == {"completed": 1}
    assert entry.recoverability.state == "completed" and not entry.recoverability.can_progress
    assert f"{job.job_id} completed (helper) for {thread.id}: 2/2 completed" in render(summary)

    async with api_stack(temporal_client, weft_config, worker.task_queue, store=store) as stack:
        keys = stack.store.api_keys
        scopes = ["tasks:write", "tasks:read", "threads:read"]
        acme, globex = keys.create("acme", scopes).secret, keys.create("globex", scopes).secret

        def client(key: str) -> httpx.AsyncClient:
            return httpx.AsyncClient(
                timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
            )

        async with client(acme) as http_acme, client(globex) as http_globex:
            body = {"assignee": "helper", "items": ["item 2"]}
            hidden = await http_globex.post("/jobs", json={**body, "threadId": thread.id})
            unknown = await http_globex.post("/jobs", json={**body, "threadId": "thread-nope"})
            assert hidden.status_code == unknown.status_code == 404, hidden.text
            assert hidden.json()["error"] == f"no thread {thread.id!r}"
            assert unknown.json()["error"] == "no thread 'thread-nope'"
            # The same words as any route naming another tenant's thread.
            route = await http_globex.get(f"/threads/{thread.id}/subagents")
            assert route.status_code == 404 and route.json()["error"] == hidden.json()["error"]
            made = await http_acme.post("/jobs", json={**body, "threadId": thread.id})
            assert made.status_code == 201, made.text
            assert made.json()["threadId"] == thread.id and made.json()["tenant"] == "acme"
            await until(
                lambda: (r := store.jobs.get(made.json()["jobId"])) and r.terminal, "ended", 60
            )
            listed = await http_acme.get(f"/threads/{thread.id}/subagents")
            assert listed.status_code == 200, listed.text
            assert [j["jobId"] for j in listed.json()["jobs"]["items"]] == [
                job.job_id,
                made.json()["jobId"],
            ]

    # The CLI's `--thread`.
    config = tmp_path / "weft.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    items = tmp_path / "items.jsonl"
    items.write_text('"item 0"\n')
    code, out, err = await weft_cli(
        config, "job", "run", "helper", "--items", str(items), "--thread", thread.id
    )
    assert code == 0, err
    from_cli = store.jobs.get(out.strip())
    assert from_cli is not None and from_cli.thread_id == thread.id


def _job(status: str, **counts: int) -> JobRecord:
    at = "2026-11-27T10:00:00.000Z"
    return JobRecord.model_validate(
        {
            "jobId": "job-aaaaaaaaaaaa",
            "assignee": "helper",
            "status": status,
            "counts": {"total": sum(counts.values()), **counts},
            "createdAt": at,
            "updatedAt": at,
        }
    )


def test_job_recoverability_is_honest():
    """Completed; cancelled (resumable, naming what is left); running, with and without
    Temporal asked; and lost (its workflow closed with no end recorded)."""
    done = job_recoverability(_job("completed", completed=2), None)
    assert (done.state, done.can_progress, done.retry) == ("completed", False, None)
    stopped = job_recoverability(_job("cancelled", completed=1, pending=1), None)
    assert (stopped.state, stopped.retry) == ("stopped", "possible")
    assert "1 pending" in stopped.reason and "weft job resume" in stopped.reason
    running = job_recoverability(_job("running", running=1), None)
    assert running.state == "running" and running.can_progress is None
    alive = job_recoverability(_job("running", running=1), "RUNNING")
    assert alive.can_progress is True
    lost = job_recoverability(_job("running", running=1), "TERMINATED")
    assert (lost.state, lost.can_progress, lost.retry) == ("lost", False, "not_possible")
