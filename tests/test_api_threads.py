"""The thread routes of the HTTP API on a real stack: start, list, read, session, messages,
files; their errors (404, 409, 422 naming the field, 400, 415, 401) and idempotent starts."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
from api_support import ApiStack, api_stack
from support import add_script, agent_definitions
from temporalio.client import WorkflowExecutionStatus

from weft.api import thread_routes
from weft.api.idempotency import REPLAYED_HEADER

SCRIPT = {"turns": [{"replies": [{"text": "hi there"}]}]}


@asynccontextmanager
async def _stack(
    start_worker: Any, temporal_client: Any, weft_config: Any, scripted_server: Any
) -> AsyncIterator[ApiStack]:
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        yield stack


async def _until(check: Callable[[], Any], *, attempts: int = 300, interval: float = 0.05) -> Any:
    """Poll the async `check` until it returns something truthy."""
    for _ in range(attempts):
        found = await check()
        if found:
            return found
        await asyncio.sleep(interval)
    raise AssertionError("condition not met")


async def _idle(stack: ApiStack, thread_id: str, turns: int = 1) -> dict[str, Any]:
    async def idle() -> dict[str, Any] | None:
        read = (await stack.http.get(f"/threads/{thread_id}")).json()
        done = read["status"] == "waiting_input" and read["counters"]["turns"] >= turns
        return read if done else None

    found: dict[str, Any] = await _until(idle)
    return found


async def _listed(stack: ApiStack, query: str, thread_id: str) -> dict[str, Any]:
    async def listed() -> dict[str, Any] | None:
        reply = await stack.http.get(f"/threads?{query}")
        assert reply.status_code == 200, reply.text
        return next((t for t in reply.json()["threads"] if t["threadId"] == thread_id), None)

    found: dict[str, Any] = await _until(listed, interval=0.1)
    return found


async def test_start_read_list_and_close(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        session = f"s-{uuid.uuid4().hex[:8]}"
        started = await stack.http.post(
            "/threads", json={"agent": "helper", "messages": ["hello"], "sessionId": session}
        )
        assert started.status_code == 201, started.text
        body = started.json()
        assert body["confirmed"] is True and body["runId"]
        thread_id = body["threadId"]

        read = await _idle(stack, thread_id)
        assert (read["threadId"], read["agent"], read["sessionId"]) == (
            thread_id,
            "helper",
            session,
        )
        assert read["lastOutcome"] == "hi there"

        snapshot = (await stack.http.get(f"/threads/{thread_id}/session?limit=1")).json()
        assert snapshot["sessionId"] == session
        history = snapshot["threads"][0]["history"]
        assert len(history["messages"]) == 1 and history["totalMessages"] == 2
        assert history["messages"][0]["content"] == "hi there"  # the live window, with content
        stored = await asyncio.to_thread(stack.store.events.last_sequence, thread_id)
        assert 0 < snapshot["eventsCursor"] <= stored
        older = await stack.http.get(
            f"/threads/{thread_id}/session", params={"before": history["olderCursor"]}
        )
        first = older.json()["threads"][0]["history"]["messages"][0]
        assert (first["role"], first["content"]) == ("user", "hello")

        listed = await _listed(stack, f"agent=helper&session={session}&status=running", thread_id)
        assert listed == {
            "threadId": thread_id,
            "agent": "helper",
            "status": listed["status"],
            "threadStatus": listed["threadStatus"],
            "sessionId": session,
            "awaitingAction": None,
            "startedAt": listed["startedAt"],
        }
        assert listed["startedAt"].endswith("Z")
        # Every open thread is `running` to the filter; it shows what it does (visibility lags).
        assert listed["status"] in ("preparing", "running", "waiting_input")
        others = await stack.http.get("/threads", params={"session": session, "awaiting": "any"})
        assert others.json()["threads"] == []

        await stack.ctx.threads.terminate(thread_id, "done")
        await stack.ctx.client.get_workflow_handle(thread_id).result()
        # Closed: read from what the thread stored.
        closed = (await stack.http.get(f"/threads/{thread_id}")).json()
        assert closed["status"] == "cancelled"
        snapshot = (await stack.http.get(f"/threads/{thread_id}/session")).json()
        assert snapshot["threads"][0]["nativeStatus"] == "cancelled"
        gone = await _listed(stack, f"session={session}&status=closed", thread_id)
        assert gone["status"] == "terminated"


async def test_list_pages_and_refuses_unsafe_filters(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        session = f"s-{uuid.uuid4().hex[:8]}"
        ids = set()
        for _ in range(3):
            reply = await stack.http.post(
                "/threads", json={"agent": "helper", "sessionId": session}
            )
            ids.add(reply.json()["threadId"])

        async def all_three() -> dict[str, Any] | None:
            page = (await stack.http.get("/threads", params={"session": session})).json()
            return page if len(page["threads"]) == 3 else None

        await _until(all_three, interval=0.1)
        seen: list[str] = []
        token = None
        for _ in range(3):
            params = {"session": session, "limit": "2", **({"pageToken": token} if token else {})}
            page = (await stack.http.get("/threads", params=params)).json()
            seen += [t["threadId"] for t in page["threads"]]
            token = page["nextPageToken"]
            if token is None:
                break
        assert sorted(seen) == sorted(ids)

        for params, field in [
            ({"agent": "x' OR WorkflowType != '"}, "query.agent"),
            ({"session": "a b"}, "query.session"),
            ({"status": "sleeping"}, "query.status"),
            ({"awaiting": "coffee"}, "query.awaiting"),
            ({"limit": "0"}, "query.limit"),
        ]:
            reply = await stack.http.get("/threads", params=params)
            assert reply.status_code == 422 and reply.json()["fields"] == [field], reply.text
        for token in ("%%%", "bm90IGEgdG9rZW4"):
            reply = await stack.http.get("/threads", params={"pageToken": token})
            assert reply.status_code == 422 and reply.json()["fields"] == ["pageToken"], reply.text
        for thread_id in ids:
            await stack.ctx.threads.terminate(thread_id)


async def test_start_refusals_name_the_field(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        refused = await stack.http.post("/threads", json={"agent": "nobody"})
        assert refused.status_code == 422 and refused.json()["fields"] == ["agent"]
        assert "'nobody'" in refused.json()["error"] and "known agents: helper" in refused.text

        thread_id = f"api-{uuid.uuid4().hex[:8]}"
        first = await stack.http.post("/threads", json={"agent": "helper", "threadId": thread_id})
        assert first.status_code == 201 and first.json()["threadId"] == thread_id
        again = await stack.http.post("/threads", json={"agent": "helper", "threadId": thread_id})
        assert again.status_code == 409 and again.json()["fields"] == ["threadId"]

        for body, field in [
            ({"agent": "helper", "carryOver": {}}, "carryOver"),
            ({"agent": "helper", "parent": {"threadId": "p"}}, "parent"),
            ({"agent": "helper", "scopedEnvRequest": "r1"}, "scopedEnvRequest"),
            ({"agent": "helper", "arguments": {"a": 1}}, "arguments"),
            ({"agent": "helper", "threadId": "a/b"}, "threadId"),
            ({"agent": "helper", "wat": 1}, "wat"),
            ({"agent": ""}, "agent"),
            ({}, "agent"),
            ({"agent": "helper", "options": {"maxTotalSteps": 0}}, "options.maxTotalSteps"),
            (
                {"agent": "helper", "options": {"heartbeatTimeoutSeconds": 1e300}},
                "options.heartbeatTimeoutSeconds",
            ),
            (
                {
                    "agent": "helper",
                    "messages": [
                        {"role": "user", "content": "x", "metadata": {"contentRef": "blob:0"}}
                    ],
                },
                "messages.0.StartMessage.metadata",
            ),
        ]:
            reply = await stack.http.post("/threads", json=body)
            assert reply.status_code == 422, reply.text
            assert field in reply.json()["fields"], (field, reply.json())
        assert (
            "not accepted over HTTP"
            in (await stack.http.post("/threads", json={"agent": "helper", "carryOver": {}})).text
        )

        broken = await stack.http.post(
            "/threads", content=b'{"agent": ', headers={"Content-Type": "application/json"}
        )
        assert broken.status_code == 400 and broken.json()["fields"] == ["body"]
        as_text = await stack.http.post(
            "/threads", content=b"agent=helper", headers={"Content-Type": "text/plain"}
        )
        assert as_text.status_code == 415
        async with httpx.AsyncClient(timeout=60, base_url=stack.url) as anonymous:
            assert (await anonymous.post("/threads", json={"agent": "helper"})).status_code == 401
            assert (await anonymous.get("/threads")).status_code == 401
            assert (await anonymous.get(f"/threads/{thread_id}")).status_code == 401
        await stack.ctx.threads.terminate(thread_id)


async def test_a_start_with_an_idempotency_key_starts_one_thread(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        key = f"start-{uuid.uuid4()}"
        body = {"agent": "helper", "messages": ["hello"]}
        first = await stack.http.post("/threads", json=body, headers={"Idempotency-Key": key})
        assert first.status_code == 201 and REPLAYED_HEADER not in first.headers
        thread_id = first.json()["threadId"]
        digest = hashlib.sha256(f"helper\n{key}".encode()).hexdigest()[:32]
        assert thread_id == f"helper-{digest}"  # readable, and the same for the same key
        # Spacing and key order do not make it another request.
        again = await stack.http.post(
            "/threads",
            content=b'{ "messages": ["hello"],   "agent": "helper" }',
            headers={"Idempotency-Key": key, "Content-Type": "application/json"},
        )
        assert again.status_code == 201 and again.headers[REPLAYED_HEADER] == "true"
        assert again.json() == first.json()

        other = await stack.http.post(
            "/threads", json={"agent": "helper"}, headers={"Idempotency-Key": key}
        )
        assert other.status_code == 422 and other.json()["fields"] == ["Idempotency-Key"]
        elsewhere = await stack.http.post(
            f"/threads/{thread_id}/terminate", json={}, headers={"Idempotency-Key": key}
        )
        assert elsewhere.status_code == 422 and "POST /threads" in elsewhere.json()["error"]
        for bad in (b"x" * 256, "caf\u00e9".encode(), b"tab\tbed"):
            reply = await stack.http.post("/threads", json=body, headers={b"Idempotency-Key": bad})
            assert reply.status_code == 400 and reply.json()["fields"] == ["Idempotency-Key"]

        # A crash after the start and before the reply was recorded: the key's record is
        # gone, the thread is not; the retry finds the thread instead of starting another.
        lost = f"lost-{uuid.uuid4()}"
        crashed = await stack.http.post("/threads", json=body, headers={"Idempotency-Key": lost})
        with stack.store.engine.begin() as connection:
            connection.exec_driver_sql("DELETE FROM idempotency_keys WHERE key = ?", (lost,))
        retried = await stack.http.post("/threads", json=body, headers={"Idempotency-Key": lost})
        assert retried.status_code == 201 and REPLAYED_HEADER not in retried.headers
        assert retried.json()["threadId"] == crashed.json()["threadId"]
        assert retried.json()["runId"] == crashed.json()["runId"]
        for started in (thread_id, crashed.json()["threadId"]):
            await _idle(stack, started)
            assert [m.content for m in stack.store.messages.list(started) if m.role == "user"] == [
                "hello"
            ]
            await stack.ctx.threads.terminate(started)


async def test_without_a_worker_a_start_is_unconfirmed(temporal_client, weft_config, monkeypatch):
    monkeypatch.setattr(thread_routes, "CONFIRM_SECONDS", 0.3)
    queue = f"no-worker-{uuid.uuid4().hex[:8]}"
    async with api_stack(temporal_client, weft_config, queue) as stack:
        reply = await stack.http.post("/threads", json={"agent": "helper"})
        assert reply.status_code == 201 and reply.json()["confirmed"] is False
        handle = temporal_client.get_workflow_handle(reply.json()["threadId"])
        assert (await handle.describe()).status == WorkflowExecutionStatus.RUNNING
        await handle.terminate()


async def test_messages_are_read_whole_and_files_safely(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        # Over 256 K characters: more than a queued message may carry, so stored as a blob.
        big = "".join(f"line {i}: {'x' * 60}\n" for i in range(4500))
        message = {"role": "user", "content": big}
        started = await stack.http.post("/threads", json={"agent": "helper", "messages": [message]})
        thread_id = started.json()["threadId"]
        await _idle(stack, thread_id)
        user = next(m for m in stack.store.messages.list(thread_id) if m.role == "user")
        assert user.metadata["contentRef"].startswith("blob:")
        fetched = await stack.http.get(f"/threads/{thread_id}/messages/{user.id}")
        assert fetched.status_code == 200
        assert fetched.json()["content"] == big and fetched.json()["role"] == "user"
        missing = await stack.http.get(f"/threads/{thread_id}/messages/nope")
        assert missing.status_code == 404

        files = stack.store.files
        files.write_file(thread_id, "/notes/today.txt", "hello\n")
        files.write_file(thread_id, "/page.html", "<script>alert(1)</script>")
        files.write_file(thread_id, "/data/r\u00e9sum\u00e9 1.bin", b"\x00\x01")
        text = await stack.http.get(f"/threads/{thread_id}/files/notes/today.txt")
        assert text.status_code == 200 and text.text == "hello\n"
        assert text.headers["content-type"].startswith("text/plain")
        assert text.headers["x-content-type-options"] == "nosniff"
        assert text.headers["content-disposition"].startswith("inline")
        page = await stack.http.get(f"/threads/{thread_id}/files/page.html")
        assert page.headers["content-type"] == "application/octet-stream"
        assert page.headers["content-disposition"] == (
            "attachment; filename=\"page.html\"; filename*=UTF-8''page.html"
        )
        binary = await stack.http.get(f"/threads/{thread_id}/files/data/r%C3%A9sum%C3%A9%201.bin")
        assert binary.content == b"\x00\x01"
        assert "filename*=UTF-8''r%C3%A9sum%C3%A9%201.bin" in binary.headers["content-disposition"]
        for path, status in [
            ("notes", 404),
            ("notes/nothing.txt", 404),
            ("%2e%2e/%2e%2e/etc/passwd", 400),
            ("notes/%2e%2e/today.txt", 400),
        ]:
            reply = await stack.http.get(f"/threads/{thread_id}/files/{path}")
            assert reply.status_code == status, (path, reply.text)
        await stack.ctx.threads.terminate(thread_id)


async def test_reads_of_an_unknown_thread_are_404(temporal_client, weft_config):
    async with api_stack(temporal_client, weft_config, "unused") as stack:
        unknown = f"thread-{uuid.uuid4().hex}"
        for path in ("", "/session", "/messages/m1", "/files/a.txt"):
            reply = await stack.http.get(f"/threads/{unknown}{path}")
            assert reply.status_code == 404, (path, reply.text)
            assert unknown in reply.json()["error"]
        control = await stack.http.get("/threads/bad%01id")
        assert control.status_code == 422
