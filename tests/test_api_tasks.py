"""The task routes of the HTTP API on a real stack: create, list, read, cancel, retry and
the task's event feed; refusals naming the field or the id, and idempotent POSTs."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from api_support import SSE, ApiStack, SseClient, api_stack
from support import add_script, agent_definitions, until

from weft.api.idempotency import REPLAYED_HEADER

ANSWER_SCHEMA = {"type": "object", "required": ["answer"]}


@asynccontextmanager
async def _stack(
    start_worker: Any,
    temporal_client: Any,
    weft_config: Any,
    scripted_server: Any,
    script: dict[str, Any],
) -> AsyncIterator[ApiStack]:
    worker = await start_worker(agent_definitions(add_script(scripted_server, script)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        yield stack


async def _create(stack: ApiStack, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    reply = await stack.http.post("/tasks", json=body, headers=headers)
    assert reply.status_code == 201, reply.text
    created: dict[str, Any] = reply.json()
    return created


async def _ended(stack: ApiStack, task_id: str) -> dict[str, Any]:
    """The task as the store has it once it has ended (60 s at most)."""

    def ended() -> dict[str, Any] | None:
        record = stack.store.tasks.get(task_id)
        return record.model_dump(mode="json", by_alias=True) if record and record.terminal else None

    found: dict[str, Any] = await until(ended, f"task {task_id} ended", timeout=60)
    return found


async def test_created_task_completes_and_its_stream_delivers_task_completed(
    start_worker, temporal_client, weft_config, scripted_server
):
    """POST /tasks starts the task (201); its SSE feed delivers every event up to
    `task.completed`; GET reads it, the snapshot lists it by status, and a completed task
    refuses cancel and retry with 409."""
    script = {"replies": [{"text": '{"answer": 42}'}]}
    async with _stack(start_worker, temporal_client, weft_config, scripted_server, script) as stack:
        created = await _create(
            stack,
            {
                "objective": "Answer.",
                "assignee": "helper",
                "acceptance": {"schema": ANSWER_SCHEMA},
                "constraints": {"maxAttempts": 2},
            },
        )
        task_id = created["taskId"]
        assert created["status"] in ("accepted", "queued", "running")
        assert created["constraints"]["maxAttempts"] == 2
        request = stack.http.stream("GET", f"/tasks/{task_id}/events", headers=SSE, timeout=90)
        async with request as response:
            assert response.status_code == 200, await response.aread()
            stream = SseClient(response)
            done = await stream.read_until(lambda m: m.get("event") == "task.completed")
        assert [m["event"] for m in stream.events()][0] == "task.created"
        assert f'"taskId":"{task_id}"' in done["data"]

        read = (await stack.http.get(f"/tasks/{task_id}")).json()
        assert read["status"] == "completed" and read["output"]["structured"] == {"answer": 42}
        listed = (await stack.http.get("/tasks", params={"status": "completed"})).json()
        assert task_id in [t["taskId"] for t in listed["recentTerminal"]]
        running = (await stack.http.get("/tasks", params={"status": "running"})).json()
        assert task_id not in [t["taskId"] for t in running["recentTerminal"]]
        await temporal_client.get_workflow_handle(task_id).result()
        page = (await stack.http.get(f"/tasks/{task_id}/events")).json()
        assert page["closed"] and page["events"][-1]["type"] == "task.completed"

        for command in ("cancel", "retry"):
            refused = await stack.http.post(f"/tasks/{task_id}/{command}", json={})
            assert refused.status_code == 409, refused.text
            assert task_id in refused.json()["error"] and "completed" in refused.json()["error"]


async def test_bad_input_is_refused_naming_the_field_or_the_id(
    start_worker, temporal_client, weft_config, scripted_server
):
    """A bad task is 422 naming its field (objective, acceptance.schema, taskId, a cycle's
    dependencies, an unknown status filter); an unknown task id is 404 naming it on every
    route."""
    script = {"replies": [{"text": "late", "delay_ms": 60_000}]}
    async with _stack(start_worker, temporal_client, weft_config, scripted_server, script) as stack:
        cases = [
            ({"objective": "", "assignee": "helper"}, "objective"),
            (
                {"objective": "x", "assignee": "helper", "acceptance": {"schema": {"type": "no"}}},
                "acceptance.schema",
            ),
            ({"objective": "x", "assignee": "helper", "taskId": "task-1"}, "taskId"),
            ({"objective": "x", "assignee": "helper", "dependencies": ["nope"]}, "dependencies"),
        ]
        for body, field in cases:
            reply = await stack.http.post("/tasks", json=body)
            assert reply.status_code == 422, reply.text
            assert field in reply.json()["fields"], reply.json()

        a, b = (f"task-{uuid.uuid4().hex[:12]}" for _ in range(2))
        await _create(
            stack, {"objective": "A.", "assignee": "helper", "taskId": a, "dependencies": [b]}
        )
        cycle = await stack.http.post(
            "/tasks",
            json={"objective": "B.", "assignee": "helper", "taskId": b, "dependencies": [a]},
        )
        assert cycle.status_code == 422 and cycle.json()["fields"] == ["dependencies"]
        assert "dependency cycle" in cycle.json()["error"]
        taken = await stack.http.post(
            "/tasks", json={"objective": "A.", "assignee": "helper", "taskId": a}
        )
        assert taken.status_code == 422 and "exists already" in taken.json()["error"]

        bad_status = await stack.http.get("/tasks", params={"status": "sleeping"})
        assert bad_status.status_code == 422 and bad_status.json()["fields"] == ["query.status.0"]

        unknown = "task-000000000000"
        for method, path in (
            ("GET", f"/tasks/{unknown}"),
            ("GET", f"/tasks/{unknown}/events"),
            ("POST", f"/tasks/{unknown}/cancel"),
            ("POST", f"/tasks/{unknown}/retry"),
        ):
            reply = await stack.http.request(method, path, json={} if method == "POST" else None)
            assert reply.status_code == 404, (path, reply.text)
            assert unknown in reply.json()["error"]

        cancelled = await stack.http.post(f"/tasks/{a}/cancel", json={"reason": "test over"})
        assert cancelled.status_code == 202, cancelled.text
        assert (await _ended(stack, a))["status"] == "cancelled"


async def test_idempotent_posts_act_once(
    start_worker, temporal_client, weft_config, scripted_server
):
    """POST /tasks and retry with one Idempotency-Key each act once: the replay gets the
    recorded reply, and a create whose reply was lost finds its task again; an unknown
    assignee fails its attempt naming it, and is retried."""
    script = {"replies": [{"text": "ok"}]}
    async with _stack(start_worker, temporal_client, weft_config, scripted_server, script) as stack:
        body = {"objective": "Anything.", "assignee": "nobody-here"}
        key = {"Idempotency-Key": f"task-{uuid.uuid4()}"}
        first = await stack.http.post("/tasks", json=body, headers=key)
        again = await stack.http.post("/tasks", json=body, headers=key)
        assert first.status_code == again.status_code == 201, again.text
        assert again.headers[REPLAYED_HEADER] == "true"
        task_id = first.json()["taskId"]
        assert again.json()["taskId"] == task_id
        # The reply was lost before it was recorded (a crash): the key names the task, so
        # the retry finds it instead of creating another.
        with stack.store.engine.begin() as connection:
            connection.exec_driver_sql(
                "DELETE FROM idempotency_keys WHERE key = ?", (key["Idempotency-Key"],)
            )
        retried = await stack.http.post("/tasks", json=body, headers=key)
        assert retried.status_code == 201 and REPLAYED_HEADER not in retried.headers
        assert retried.json()["taskId"] == task_id
        mine = [r for r in stack.store.tasks.list() if r.objective == "Anything."]
        assert [r.task_id for r in mine] == [task_id]

        failed = await _ended(stack, task_id)
        assert failed["status"] == "failed" and "nobody-here" in failed["attempts"][0]["error"]
        retry_key = {"Idempotency-Key": f"retry-{uuid.uuid4()}"}
        retried = await stack.http.post(f"/tasks/{task_id}/retry", json={}, headers=retry_key)
        assert retried.status_code == 202, retried.text
        replayed = await stack.http.post(f"/tasks/{task_id}/retry", json={}, headers=retry_key)
        assert replayed.status_code == 202 and replayed.headers[REPLAYED_HEADER] == "true"

        def attempts_ended() -> bool:
            record = stack.store.tasks.get(task_id)
            return record is not None and record.terminal and len(record.attempts) == 2

        await until(attempts_ended, "the retry's one attempt ended", timeout=60)


async def test_task_commands_over_http(start_worker, temporal_client, weft_config, scripted_server):
    """The commands as routes: a refused input is 422 naming its field, a state that
    forbids the command 409, an unknown task 404; each answers with the task (202)."""
    script = {"replies": [{"text": "late", "delay_ms": 60_000}]}
    async with _stack(start_worker, temporal_client, weft_config, scripted_server, script) as stack:
        held = await _create(
            stack,
            {
                "objective": "Answer.",
                "assignee": "helper",
                "autoStart": False,
                "acceptance": {"schema": {"type": "object", "required": ["answer"]}},
            },
        )
        task_id = held["taskId"]
        assert held["status"] == "accepted" and held["autoStart"] is False

        async def post(command: str, body: dict[str, Any], status: int) -> dict[str, Any]:
            reply = await stack.http.post(f"/tasks/{task_id}/{command}", json=body)
            assert reply.status_code == status, (command, reply.text)
            answer: dict[str, Any] = reply.json()
            return answer

        refused = await post("update", {"objective": ""}, 422)
        assert refused["fields"] == ["objective"]
        updated = await post("update", {"objective": "Answer now.", "by": "ops"}, 202)
        assert updated["objective"] == "Answer now."
        cycle = await post("link", {"dependsOn": task_id}, 422)
        assert cycle["fields"] == ["dependsOn"] and "dependency cycle" in cycle["error"]
        assert "not paused" in (await post("resume", {}, 409))["error"]
        assert (await post("pause", {"by": "ops"}, 202))["status"] == "paused"
        assert (await post("start", {"by": "ops"}, 202))["status"] == "paused"
        assert (await post("progress", {"message": "waiting"}, 202))["taskId"] == task_id
        bad = await post("complete", {"structured": {"other": 1}}, 422)
        assert bad["fields"] == ["structured"] and "answer" in bad["error"]
        done = await post("complete", {"structured": {"answer": 1}, "by": "ops"}, 202)
        assert done["status"] == "completed" and done["endedBy"] == "ops"
        assert done["attempts"] == [] and done["output"]["structured"] == {"answer": 1}
        assert "completed" in (await post("fail", {}, 409))["error"]

        unknown = "task-000000000000"
        for command in ("start", "pause", "resume", "fail", "complete", "update", "progress"):
            body = {"progress": {"message": "x"}, "update": {"objective": "x"}}.get(command, {})
            reply = await stack.http.post(f"/tasks/{unknown}/{command}", json=body)
            assert reply.status_code == 404 and unknown in reply.json()["error"], reply.text
