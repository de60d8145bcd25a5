"""Tasks and jobs belong to a tenant (docs/tenants.md): two tenants' keys against a real
`weft serve` app (a worker on the scripted model, the session's dev server). A task or job
is its key's tenant's, its attempt threads and its items' tasks too; another tenant's key
gets 404 worded as for an unknown one and never lists it; a key without `tasks:read` /
`tasks:write` gets 403 naming the scope; from Python, `tenant=` names the tenant and a
bad one is refused naming the field.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from api_support import ApiStack, api_stack
from support import add_script, agent_definitions, until

from weft.activities import tenant_deletion
from weft.api.auth import TENANT_ATTRIBUTE
from weft.client.tasks import TaskError, Tasks
from weft.store import Store

SCRIPT = {"replies": [{"text": "done"}]}
TASKS = ["tasks:read", "tasks:write"]


def _client(stack: ApiStack, tenant: str, scopes: list[str]) -> httpx.AsyncClient:
    key = stack.store.api_keys.create(tenant, scopes).secret
    return httpx.AsyncClient(
        timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
    )


async def test_tasks_and_jobs_are_their_tenants_own(
    start_worker, temporal_client, weft_config, scripted_server
):
    """acme's task and job: acme's attempt thread and item task, 404 and unlisted for
    globex, 403 for keys without the tasks scopes, 422 for a body naming another tenant."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        acme_name, globex_name = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("acme", "globex"))
        store = stack.store
        async with (
            _client(stack, acme_name, TASKS) as acme,
            _client(stack, globex_name, TASKS) as globex,
            _client(stack, acme_name, ["threads:read", "threads:write"]) as threads_only,
            _client(stack, acme_name, ["tasks:read"]) as reader,
        ):
            created = await acme.post("/tasks", json={"objective": "Do it.", "assignee": "helper"})
            assert created.status_code == 201, created.text
            task_id = created.json()["taskId"]
            assert created.json()["scope"]["tenant"] == acme_name
            job = await acme.post(
                "/jobs", json={"assignee": "helper", "items": ["one"], "concurrency": 1}
            )
            assert job.status_code == 201, job.text
            job_id = job.json()["jobId"]
            assert job.json()["tenant"] == acme_name
            assert (store.tasks.tenant(task_id), store.jobs.tenant(job_id)) == (acme_name,) * 2

            # Another tenant's key: 404 as for an unknown task or job, on every route.
            for method, path, body in [
                ("GET", f"/tasks/{task_id}", None),
                ("GET", f"/tasks/{task_id}/events", None),
                ("POST", f"/tasks/{task_id}/cancel", {}),
                ("POST", f"/tasks/{task_id}/progress", {"message": "hi"}),
                ("GET", f"/jobs/{job_id}", None),
                ("GET", f"/jobs/{job_id}/results", None),
                ("POST", f"/jobs/{job_id}/cancel", {}),
                ("DELETE", f"/tasks/{task_id}", None),
                ("DELETE", f"/jobs/{job_id}", None),
            ]:
                reply = await globex.request(method, path, json=body)
                assert reply.status_code == 404, (path, reply.text)
                unknown = path.replace(task_id, "task-000000000000").replace(
                    job_id, "job-000000000000"
                )
                known_as = await globex.request(method, unknown, json=body)
                assert (
                    reply.json()["error"]
                    .replace(task_id, "task-000000000000")
                    .replace(job_id, "job-000000000000")
                    == known_as.json()["error"]
                ), path
            listed = (await globex.get("/tasks")).json()
            assert task_id not in str(listed)
            assert (await globex.get("/jobs")).json() == []
            assert task_id in str((await acme.get("/tasks")).json())
            assert [j["jobId"] for j in (await acme.get("/jobs")).json()] == [job_id]

            # Scopes: tasks:read reads, tasks:write is needed to act; thread scopes do neither.
            refused = await threads_only.get("/tasks")
            assert refused.status_code == 403 and "'tasks:read'" in refused.json()["error"]
            refused = await threads_only.get(f"/jobs/{job_id}")
            assert refused.status_code == 403 and "'tasks:read'" in refused.json()["error"]
            assert (await reader.get(f"/tasks/{task_id}")).status_code == 200
            refused = await reader.post("/jobs", json={"assignee": "helper", "items": ["x"]})
            assert refused.status_code == 403 and "'tasks:write'" in refused.json()["error"]

            # A body naming another tenant is refused, naming the field.
            task_body: dict[str, Any] = {"objective": "x", "assignee": "helper"}
            refused = await acme.post(
                "/tasks", json={**task_body, "scope": {"tenant": globex_name}}
            )
            assert refused.status_code == 422 and refused.json()["fields"] == ["scope.tenant"]
            refused = await acme.post(
                "/jobs", json={"assignee": "helper", "items": ["x"], "tenant": globex_name}
            )
            assert refused.status_code == 422 and refused.json()["fields"] == ["tenant"]

            # A task may not wait on another tenant's task (its events would repeat that
            # task's status): refused at create and at link, naming the field.
            refused = await globex.post("/tasks", json={**task_body, "dependencies": [task_id]})
            assert refused.status_code == 422 and refused.json()["fields"] == ["dependencies"]
            held = await globex.post("/tasks", json={**task_body, "autoStart": False})
            assert held.status_code == 201, held.text
            held_id = held.json()["taskId"]
            refused = await globex.post(f"/tasks/{held_id}/link", json={"dependsOn": task_id})
            assert refused.status_code == 422 and refused.json()["fields"] == ["dependsOn"]
            assert store.tasks.get(held_id).dependencies == []  # type: ignore[union-attr]

            # The attempt thread and the item's task (and its thread) are acme's.
            done = await until(
                lambda: (r := store.tasks.get(task_id)) and r.terminal and r, "task ended"
            )
            assert done.status == "completed", done
            attempt_thread = done.attempts[0].thread_id
            assert attempt_thread is not None
            assert store.threads.tenant(attempt_thread) == acme_name
            described = await temporal_client.get_workflow_handle(attempt_thread).describe()
            assert described.typed_search_attributes.get(TENANT_ATTRIBUTE) == acme_name
            ended = await until(
                lambda: (r := store.jobs.get(job_id)) and r.terminal and r, "job ended", 60
            )
            assert ended.status == "completed", ended
            (item,) = store.jobs.items(job_id)
            assert store.tasks.tenant(item.task_id) == acme_name
            item_task = store.tasks.get(item.task_id)
            assert item_task is not None and item_task.attempts[0].thread_id is not None
            assert store.threads.tenant(item_task.attempts[0].thread_id) == acme_name

            # Deleting globex cancels its open task first (no attempt may start for a
            # tenant being deleted), then deletes it; acme's task stays.
            report = await tenant_deletion.delete_tenant(temporal_client, store, globex_name)
            assert report.cancelled == [held_id]
            assert [t.task_id for t in report.tasks] == [held_id]
            assert store.tasks.get(held_id) is None
            assert store.tasks.get(task_id).status == "completed"  # type: ignore[union-attr]


async def test_python_tasks_take_a_tenant(temporal_client, weft_config):
    """`Tasks.create(tenant=)`: the task's tenant, listed by it; a bad name or one that
    contradicts `scope.tenant` is refused naming the field; none is `default`'s."""
    with Store.open(weft_config.store_url()) as store:
        tasks = Tasks(temporal_client, store, task_queue=f"q-{uuid.uuid4().hex[:6]}")
        held = await tasks.create("x", "helper", tenant="acme", auto_start=False)
        assert held.scope.tenant == "acme" and store.tasks.tenant(held.task_id) == "acme"
        plain = await tasks.create("y", "helper", auto_start=False)
        assert plain.scope.tenant is None and store.tasks.tenant(plain.task_id) == "default"
        assert [t.task_id for t in tasks.list(tenant="acme")] == [held.task_id]
        with pytest.raises(TaskError) as bad:
            await tasks.create("x", "helper", tenant="a b", auto_start=False)
        assert bad.value.field == "tenant"
        with pytest.raises(TaskError) as contradicting:
            await tasks.create(
                "x", "helper", tenant="acme", scope={"tenant": "globex"}, auto_start=False
            )
        assert contradicting.value.field == "scope.tenant"
