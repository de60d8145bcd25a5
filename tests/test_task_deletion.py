"""Deleting a task or a job leaves nothing of it: a unique marker put in a task's objective,
progress and result, and in a job's items (their inputs and answers), is found in no byte
of the SQLite file (after VACUUM) or any PostgreSQL table once they are deleted with their
threads, and Temporal neither lists nor describes any of their workflows. A task others
depend on is refused without `force`; with it, the dependent's edge goes, recorded in its
log. Then: a deletion interrupted after the store's part finishes on retry, the HTTP
routes (scopes, refusals, idempotency records, 404 once gone), the CLI, and a tenant's
deletion deleting its jobs and tasks, not only cancelling them.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from api_support import api_stack
from sqlalchemy import select
from support import add_script, agent_definitions, until, weft_cli
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode
from test_deletion import _postgres_tables_holding, _sqlite_bytes_hold, _sqlite_raw_holds

from weft.activities import task_deletion
from weft.activities.task_deletion import DeletionRefused
from weft.activities.tenant_deletion import delete_tenant
from weft.activities.thread_deletion import ThreadNotFound, delete_thread
from weft.client.jobs import JobNotFound, Jobs
from weft.client.tasks import TaskError, TaskNotFound, Tasks
from weft.contract.tasks import QUERY_TASK, TaskRecord
from weft.store import Store
from weft.store.tables import idempotency_keys


def _script(marker: str) -> dict[str, Any]:
    """Answers that repeat the marker: the task's result and each item's."""
    return {
        "turns": [
            {"match": "regex:^Answer", "replies": [{"text": f"result {marker}"}]},
            {"match": "regex:^item", "replies": [{"text": f"answer {marker}"}]},
            {"match": "*", "replies": [{"text": "ok"}]},
        ]
    }


async def _forgotten(client: Client, workflow_id: str) -> None:
    """Temporal neither lists nor describes any execution of `workflow_id`."""
    listed = [w async for w in client.list_workflows(f"WorkflowId = '{workflow_id}'")]
    assert listed == [], workflow_id
    with pytest.raises(RPCError) as raised:
        await client.get_workflow_handle(workflow_id).describe()
    assert raised.value.status == RPCStatusCode.NOT_FOUND


async def _ended(tasks: Tasks, task_id: str) -> TaskRecord:
    return await asyncio.wait_for(tasks.wait(task_id), timeout=60)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_deleted_task_and_job_leave_no_byte(
    backend, start_worker, temporal_client, scripted_server, weft_config, request, monkeypatch
):
    if backend == "postgres":
        weft_config.store.url = request.getfixturevalue("postgres_databases")()
    marker = f"MRK{uuid.uuid4().hex}"
    worker = await start_worker(agent_definitions(add_script(scripted_server, _script(marker))))
    store = worker.store
    assert store is not None
    tasks = Tasks(temporal_client, store, task_queue=worker.task_queue)
    jobs = Jobs(temporal_client, store, task_queue=worker.task_queue)

    task = await tasks.create(f"Answer about {marker}.", "helper", auto_start=False)
    # Progress signalled before the run has read its input is dropped (the run's first
    # activation handles signals first): wait for the run to answer its query.
    run = temporal_client.get_workflow_handle(task.task_id)
    while await run.query(QUERY_TASK) is None:
        await asyncio.sleep(0.05)
    await tasks.append_progress(task.task_id, f"noted {marker}", {"marker": marker})
    await until(lambda: tasks.get(task.task_id).progress, "the progress stored")
    await tasks.start(task.task_id)
    done = await _ended(tasks, task.task_id)
    assert done.status == "completed" and done.output is not None
    assert done.output.response == f"result {marker}"
    # A held task that depends on it (no marker of its own).
    dependent = await tasks.create(
        "Then this.", "helper", dependencies=[task.task_id], auto_start=False
    )
    job = await jobs.create("helper", [f"item one {marker}", f"item two {marker}"])
    finished = await asyncio.wait_for(jobs.wait(job.job_id), timeout=60)
    assert finished.status == "completed", finished
    items = list(jobs.items(job.job_id))
    item_tasks = [store.tasks.get(i.task_id) for i in items]
    threads = [a.thread_id for t in [done, *item_tasks] if t is not None for a in t.attempts]
    assert len(threads) == 3
    if backend == "postgres":
        held = set(_postgres_tables_holding(store, marker))
        assert {"events", "tasks", "job_items", "messages"} <= held, held
    else:
        assert _sqlite_raw_holds(Path(weft_config.store_url().removeprefix("sqlite:///")), marker)

    # Refused while another task depends on it, and for a job's item's task.
    with pytest.raises(DeletionRefused) as refused:
        await tasks.delete(task.task_id)
    assert refused.value.field == "force" and dependent.task_id in str(refused.value)
    with pytest.raises(DeletionRefused) as refused:
        await tasks.delete(items[0].task_id)
    assert refused.value.field == "taskId" and job.job_id in str(refused.value)
    assert store.tasks.get(task.task_id) is not None  # a refusal changes nothing

    if backend == "postgres":
        # A crash after the threads and the store's part, before Temporal's: the retry
        # below finishes.
        async def crash(*_: Any) -> int:
            raise RuntimeError("crashed before Temporal")

        monkeypatch.setattr(task_deletion, "delete_executions", crash)
        with pytest.raises(RuntimeError, match="crashed"):
            await tasks.delete(task.task_id, force=True, with_threads=True)
        monkeypatch.undo()
        assert store.tasks.get(task.task_id) is None
    report = await tasks.delete(task.task_id, force=True, with_threads=True)
    (deleted,) = report.tasks
    assert deleted.executions == 1
    if backend == "sqlite":
        assert deleted.unlinked == [dependent.task_id]
        assert deleted.rows["tasks"] == 1 and deleted.rows["events"] >= 5
        assert report.thread_ids == [done.attempts[0].thread_id]
    # The dependent lost its edge, and its own log says why (its run recorded it).
    kept = tasks.get(dependent.task_id)
    assert kept.dependencies == [] and kept.status == "accepted"
    (unlinked,) = [
        e for e in tasks.events(dependent.task_id) if e.type.endswith("dependency.updated")
    ]
    assert unlinked.payload["change"] == "removed"
    assert unlinked.payload["reason"] == f"task {task.task_id} was deleted"
    # The dependent, open, is cancelled first (waited for), then deleted.
    report = await tasks.delete(dependent.task_id)
    assert report.cancelled == [dependent.task_id] and store.tasks.get(dependent.task_id) is None

    report = await jobs.delete(job.job_id, with_threads=True)
    (gone,) = report.jobs
    assert gone.rows["job_items"] == 2 and gone.rows["jobs"] == 1 and gone.executions >= 1
    assert sorted(t.task_id for t in report.tasks) == sorted(i.task_id for i in items)
    assert len(report.threads) == 2

    if backend == "postgres":
        assert _postgres_tables_holding(store, marker) == []
    else:
        db = Path(weft_config.store_url().removeprefix("sqlite:///"))
        assert not _sqlite_bytes_hold(db, marker)
    everything = [task.task_id, dependent.task_id, job.job_id, *threads]
    for workflow_id in everything + [i.task_id for i in items]:
        await _forgotten(temporal_client, workflow_id)
    # Gone for every caller, said the same way; the audit log keeps ids only.
    with pytest.raises(TaskNotFound, match=task.task_id):
        await tasks.delete(task.task_id)
    with pytest.raises(JobNotFound, match=job.job_id):
        await jobs.delete(job.job_id)
    audited = [e.path for e in store.audit.list() if e.method == "DELETE"]
    assert f"/tasks/{task.task_id}" in audited and f"/jobs/{job.job_id}" in audited


async def test_http_task_and_job_deletion(
    start_worker, temporal_client, scripted_server, weft_config
):
    worker = await start_worker(agent_definitions(add_script(scripted_server, _script("x"))))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        keys = stack.store.api_keys
        writer = keys.create("acme", ["tasks:read", "tasks:write"]).secret
        reader = keys.create("acme", ["tasks:read"]).secret
        headers = {"Authorization": f"Bearer {writer}"}
        async with (
            httpx.AsyncClient(timeout=60, base_url=stack.url, headers=headers) as acme,
            httpx.AsyncClient(
                timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {reader}"}
            ) as read_only,
        ):
            made = await acme.post(
                "/tasks",
                json={"objective": "Hold.", "assignee": "helper", "autoStart": False},
                headers={"Idempotency-Key": "task-1"},
            )
            assert made.status_code == 201, made.text
            task_id = made.json()["taskId"]
            after = await acme.post(
                "/tasks",
                json={"objective": "After.", "assignee": "helper", "autoStart": False},
                headers={"Idempotency-Key": "task-2"},
            )
            after_id = after.json()["taskId"]
            linked = await acme.post(
                f"/tasks/{after_id}/link",
                json={"dependsOn": task_id},
                headers={"Idempotency-Key": "link-1"},
            )
            assert linked.status_code == 202, linked.text

            # The dependent has ended: its edge is removed in its log directly (no run).
            ended = await acme.post(
                f"/tasks/{after_id}/cancel", json={}, headers={"Idempotency-Key": "cancel-1"}
            )
            assert ended.status_code == 202, ended.text
            await until(lambda: stack.store.tasks.get(after_id).terminal, "dependent ended")  # type: ignore[union-attr]
            refused = await read_only.delete(f"/tasks/{task_id}")
            assert refused.status_code == 403 and "tasks:write" in refused.json()["error"]
            conflict = await acme.delete(f"/tasks/{task_id}")
            assert conflict.status_code == 409 and conflict.json()["fields"] == ["force"]
            deleted = await acme.delete(f"/tasks/{task_id}", params={"force": "true"})
            assert deleted.status_code == 200, deleted.text
            (record,) = deleted.json()["tasks"]
            assert record["taskId"] == task_id and record["unlinked"] == [after_id]
            assert record["idempotencyKeys"] == 1  # its POST /tasks
            assert deleted.json()["cancelled"] == [task_id]
            after_record = stack.store.tasks.get(after_id)
            assert after_record is not None and after_record.dependencies == []
            (removed,) = [
                e
                for e in stack.store.tasks.events(after_id)
                if e.type == "task.dependency.updated" and e.payload["change"] == "removed"
            ]
            assert removed.payload["dependsOn"] == task_id
            again = await acme.delete(f"/tasks/{task_id}", params={"force": "true"})
            assert again.status_code == 404 and again.json()["error"] == f"no task {task_id!r}"
            # The dependent's link request (POST /tasks/{after}/link) is its own: kept.
            deleted = await acme.delete(f"/tasks/{after_id}")
            assert deleted.status_code == 200 and deleted.json()["tasks"][0]["idempotencyKeys"] == 3

            job = await acme.post(
                "/jobs",
                json={"assignee": "helper", "items": ["item a"], "concurrency": 1},
                headers={"Idempotency-Key": "job-1"},
            )
            assert job.status_code == 201, job.text
            job_id = job.json()["jobId"]
            await until(lambda: (r := stack.store.jobs.get(job_id)) and r.terminal, "job ended", 60)
            gone = await acme.delete(f"/jobs/{job_id}")
            assert gone.status_code == 200, gone.text
            assert gone.json()["jobs"][0]["idempotencyKeys"] == 1
            assert len(gone.json()["tasks"]) == 1
            assert (await acme.delete(f"/jobs/{job_id}")).status_code == 404
            assert (await acme.get(f"/jobs/{job_id}")).status_code == 404
        # Every idempotency record of the requests on them went with them.
        with stack.store.database.read() as connection:
            left = list(connection.scalars(select(idempotency_keys.c.scope)))
        assert left == [], left


async def test_cli_deletes_tasks_jobs_and_a_tenants_work(temporal_client, weft_config, tmp_path):
    """No worker serves the queue: the runs never answer their cancel, so each is
    terminated after `--grace`; a tenant's deletion deletes its job and task."""
    config = tmp_path / "weft.yml"
    queue = f"idle-{uuid.uuid4().hex[:8]}"
    config.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": weft_config.temporal.address, "taskQueue": queue},
                "store": {"url": weft_config.store_url()},
            }
        )
    )
    with Store.open(weft_config.store_url()) as store:
        tasks = Tasks(temporal_client, store, task_queue=queue)
        jobs = Jobs(temporal_client, store, task_queue=queue)
        lone = await tasks.create("Alone.", "helper")
        job = await jobs.create("helper", ["one"])
        # A tenant of this test's own: Temporal's visibility is shared with other tests,
        # and a tenant deletion deletes every thread it lists for the tenant.
        acme = f"acme-{uuid.uuid4().hex[:8]}"
        acme_task = await tasks.create("Acme's.", "helper", tenant=acme)
        acme_job = await jobs.create("helper", ["one"], tenant=acme)

        # A task's id is no thread's: a thread's deletion would take the task's log.
        with pytest.raises(ThreadNotFound):
            await delete_thread(temporal_client, store, lone.task_id)
        assert tasks.events(lone.task_id)
        # The CLI's two deletions and the tenant's at once: each waits on Temporal.
        (code, out, err), (job_code, job_out, job_err), report = await asyncio.gather(
            weft_cli(config, "task", "delete", lone.task_id, "--yes", "--grace", "0"),
            weft_cli(config, "job", "delete", job.job_id, "--yes", "--grace", "0", "--json"),
            delete_tenant(temporal_client, store, acme, grace=0),
        )
        assert code == 0, err
        assert f"deleted task {lone.task_id}: 2 rows, 1 Temporal executions" in out, out
        assert job_code == 0, job_err
        assert f'"jobId": "{job.job_id}"' in job_out and '"cancelled"' in job_out, job_out
        assert store.jobs.get(job.job_id) is None and store.deletion.job_known(job.job_id) is False
        await _forgotten(temporal_client, job.job_id)
        with pytest.raises(TaskNotFound, match=f"no task {lone.task_id!r}"):
            await tasks.delete(lone.task_id)
        with pytest.raises(TaskError) as bad:
            await tasks.delete("task-1")
        assert bad.value.field == "taskId" and "is not a task id" in str(bad.value)

        assert [j.job_id for j in report.jobs] == [acme_job.job_id]
        assert acme_task.task_id in [t.task_id for t in report.tasks]
        assert sorted(report.cancelled) == sorted([acme_job.job_id, acme_task.task_id])
        assert store.deletion.tenant_work(acme) == ([], [])
        for workflow_id in (acme_job.job_id, acme_task.task_id):
            await _forgotten(temporal_client, workflow_id)
