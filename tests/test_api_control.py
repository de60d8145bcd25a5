"""The control routes of the HTTP API on a real stack: messages, turns, actions, queue edits
and terminate; idempotent retries (once in the transcript), and the 404/409/4xx rules.

A thread asked "ask me" waits on an ask_human question: its turn cannot end, so whatever is
queued meanwhile stays in its queue until the question is answered, with no timing."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from api_support import ApiStack, api_stack, idle, read_until
from support import add_script

from weft.api.idempotency import REPLAYED_HEADER, request_fingerprint
from weft.definitions import Definitions, define_agent, define_model, define_prompt
from weft.store.idempotency import Claimed

SCRIPT = {
    "turns": [
        {
            "match": "ask me",
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]},
                {"text": "Thanks, noted."},
            ],
        },
        {"match": "*", "replies": [{"text": "hi"}]},
    ]
}


def _definitions(script: str) -> Definitions:
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="asker",
            toolDescription="asks",
            model="scripted",
            prompt="Ask.",
            tools=["ask_human"],
        ),
        define_agent(name="helper", sideA={"prompt": "asker"}),
    )


@asynccontextmanager
async def _stack(
    start_worker: Any, temporal_client: Any, weft_config: Any, scripted_server: Any
) -> AsyncIterator[ApiStack]:
    worker = await start_worker(_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        yield stack


async def _thread(stack: ApiStack, first: str) -> str:
    reply = await stack.http.post("/threads", json={"agent": "helper", "messages": [first]})
    assert reply.status_code == 201, reply.text
    thread_id: str = reply.json()["threadId"]
    return thread_id


async def _waiting_thread(stack: ApiStack) -> tuple[str, str]:
    """A thread waiting on its ask_human question: (thread id, action id)."""
    thread_id = await _thread(stack, "ask me")
    read = await read_until(stack, thread_id, lambda r: bool(r["pendingActions"]))
    return thread_id, read["pendingActions"][0]["actionId"]


def _users(stack: ApiStack, thread_id: str) -> list[str | None]:
    return [m.content for m in stack.store.messages.list(thread_id) if m.role == "user"]


async def test_a_retried_message_is_queued_once(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        thread_id, action_id = await _waiting_thread(stack)
        path = f"/threads/{thread_id}/messages"
        key = {"Idempotency-Key": f"msg-{uuid.uuid4()}"}
        first = await stack.http.post(path, json={"content": "first"}, headers=key)
        assert first.status_code == 202, first.text
        assert first.json()["status"] == "queued" and first.json()["queueId"]
        replay = await stack.http.post(path, json={"content": "first"}, headers=key)
        assert replay.status_code == 202 and replay.headers[REPLAYED_HEADER] == "true"
        assert replay.json() == first.json()

        # The reply was lost before it was recorded (a crash): the retry acts again, and
        # Temporal answers the update id the key gives with the first outcome.
        with stack.store.engine.begin() as connection:
            connection.exec_driver_sql(
                "DELETE FROM idempotency_keys WHERE key = ?", (key["Idempotency-Key"],)
            )
        retried = await stack.http.post(path, json={"content": "first"}, headers=key)
        assert retried.status_code == 202 and REPLAYED_HEADER not in retried.headers
        assert retried.json() == first.json()
        read = (await stack.http.get(f"/threads/{thread_id}")).json()
        assert [q["queueId"] for q in read["queue"]] == [first.json()["queueId"]]

        other = await stack.http.post(path, json={"content": "changed"}, headers=key)
        assert other.status_code == 422 and other.json()["fields"] == ["Idempotency-Key"]

        # Another request holds a key and has not finished: retry later.
        busy = f"busy-{uuid.uuid4()}"
        body = json.dumps({"content": "second"}).encode()
        scope = f"POST {path}"
        held = stack.store.idempotency.claim(busy, scope, request_fingerprint(scope, "", body))
        assert isinstance(held, Claimed)
        pending = await stack.http.post(
            path,
            content=body,
            headers={"Idempotency-Key": busy, "Content-Type": "application/json"},
        )
        assert pending.status_code == 409 and "in progress" in pending.json()["error"]
        assert pending.json()["fields"] == ["Idempotency-Key"]

        big = "y" * (100 * 1024)
        large = await stack.http.post(path, json={"content": big, "metadata": {"tag": 1}})
        assert large.status_code == 202, large.text
        answered = await stack.http.post(
            f"/threads/{thread_id}/actions/{action_id}",
            json={"decision": "answer", "answer": "Lisbon"},
        )
        assert answered.status_code == 200, answered.text
        await read_until(stack, thread_id, idle(1))
        assert _users(stack, thread_id) == ["ask me", "first", big]
        stored = next(m for m in stack.store.messages.list(thread_id) if m.content == big)
        assert stored.metadata["tag"] == 1 and stored.metadata["contentRef"].startswith("blob:")
        await stack.ctx.threads.terminate(thread_id)


async def test_turns_with_policies_and_waits(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        thread_id = await _thread(stack, "hello")
        await read_until(stack, thread_id, idle(1))
        turns = f"/threads/{thread_id}/turns"
        done = await stack.http.post(turns, json={"content": "again", "wait": "completed"})
        assert done.status_code == 200, done.text
        assert done.json()["status"] == "completed" and done.json()["response"] == "hi"
        queued = await stack.http.post(turns, json={"content": "once more"})
        assert queued.status_code == 202 and queued.json()["status"] in ("accepted", "queued")
        await read_until(stack, thread_id, idle(3))

        asked = await stack.http.post(turns, json={"content": "ask me"})
        assert asked.status_code == 202
        read = await read_until(stack, thread_id, lambda r: bool(r["pendingActions"]))
        action_id = read["pendingActions"][0]["actionId"]
        refused = await stack.http.post(turns, json={"content": "now!", "policy": "reject"})
        assert refused.status_code == 409 and "policy 'reject'" in refused.json()["error"]
        refused_waiting = await stack.http.post(
            turns, json={"content": "now!", "policy": "reject", "wait": "completed"}
        )
        assert refused_waiting.status_code == 409

        # The turn cannot end before the answer: the wait times out, the key is not spent.
        key = {"Idempotency-Key": f"turn-{uuid.uuid4()}"}
        body = {"content": "and then?", "wait": "completed", "timeoutSeconds": 0.5}
        waiting = await stack.http.post(turns, json=body, headers=key)
        assert waiting.status_code == 202, waiting.text
        assert waiting.json()["status"] == "waiting" and waiting.json()["updateId"]
        assert "same Idempotency-Key" in waiting.json()["message"]
        await stack.http.post(
            f"/threads/{thread_id}/actions/{action_id}", json={"decision": "deny"}
        )
        # Asked again with the key (a longer wait this time: the timed-out request left no
        # record), it waits on the same update: the message is not queued twice.
        ended = await stack.http.post(turns, json={**body, "timeoutSeconds": 60}, headers=key)
        assert ended.status_code == 200, ended.text
        assert ended.json()["status"] == "completed"
        await read_until(stack, thread_id, idle(4))
        assert _users(stack, thread_id).count("and then?") == 1

        for bad, field in [
            ({"content": "x", "timeoutSeconds": 5}, "timeoutSeconds"),
            ({"content": "x", "wait": "completed", "timeoutSeconds": 301}, "timeoutSeconds"),
            ({"content": "x", "policy": "bogus"}, "policy"),
            ({"content": "x", "role": "tool"}, "role"),
            ({"role": "user"}, "content"),
            ({"content": "x", "metadata": {"contentRef": "blob:00"}}, "metadata"),
        ]:
            reply = await stack.http.post(turns, json=bad)
            assert reply.status_code == 422 and reply.json()["fields"] == [field], reply.text
        await stack.ctx.threads.terminate(thread_id)


async def test_actions_are_answered_once(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        thread_id, action_id = await _waiting_thread(stack)
        path = f"/threads/{thread_id}/actions/{action_id}"
        for body, status, field in [
            ({"decision": "approve"}, 422, "decision"),  # an ask_human takes answer or deny
            ({"decision": "maybe"}, 422, "decision"),
            ({"decision": "answer"}, 422, "answer"),
            ({"decision": "deny", "answer": "x"}, 422, "answer"),
            ({"decision": "deny", "scope": "session"}, 422, "scope"),
        ]:
            reply = await stack.http.post(path, json=body)
            assert reply.status_code == status and reply.json()["fields"] == [field], reply.text
        unknown = await stack.http.post(
            f"/threads/{thread_id}/actions/act-unknown", json={"decision": "deny"}
        )
        assert unknown.status_code == 404 and "no pending action" in unknown.json()["error"]

        key = {"Idempotency-Key": f"act-{uuid.uuid4()}"}
        answer = {"decision": "answer", "answer": {"city": "Lisbon"}}
        resolved = await stack.http.post(path, json=answer, headers=key)
        assert resolved.status_code == 200, resolved.text
        assert resolved.json() == {
            "actionId": action_id,
            "status": "resolved",
            "decision": "answer",
        }
        replay = await stack.http.post(path, json=answer, headers=key)
        assert replay.status_code == 200 and replay.headers[REPLAYED_HEADER] == "true"
        again = await stack.http.post(path, json=answer)
        assert again.status_code == 409 and "already resolved" in again.json()["error"]
        await read_until(stack, thread_id, idle(1))
        tool = next(m for m in stack.store.messages.list(thread_id) if m.role == "tool")
        assert "Lisbon" in (tool.content or "")
        await stack.ctx.threads.terminate(thread_id)


async def test_queued_turns_are_removed_and_promoted(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        thread_id, action_id = await _waiting_thread(stack)
        queue_ids = []
        for text in ("first", "second", "third"):
            reply = await stack.http.post(f"/threads/{thread_id}/messages", json={"content": text})
            queue_ids.append(reply.json()["queueId"])
        base = f"/threads/{thread_id}/queue"
        promoted = await stack.http.post(f"{base}/{queue_ids[2]}/promote")
        assert promoted.status_code == 202
        assert promoted.json() == {
            "threadId": thread_id,
            "queueId": queue_ids[2],
            "action": "promote",
            "status": "requested",
        }
        removed = await stack.http.post(f"{base}/{queue_ids[0]}/remove", json={})
        assert removed.status_code == 202 and removed.json()["action"] == "remove"
        for action in ("remove", "promote"):
            unknown = await stack.http.post(f"{base}/q-unknown/{action}")
            assert unknown.status_code == 404 and "q-unknown" in unknown.json()["error"]
        read = await read_until(stack, thread_id, lambda r: len(r["queue"]) == 2)
        assert [q["queueId"] for q in read["queue"]] == [queue_ids[2], queue_ids[1]]
        await stack.http.post(
            f"/threads/{thread_id}/actions/{action_id}", json={"decision": "deny"}
        )
        await read_until(stack, thread_id, idle(1))
        assert _users(stack, thread_id) == ["ask me", "third", "second"]
        await stack.ctx.threads.terminate(thread_id)


async def test_terminate_then_every_control_route_is_409(
    start_worker, temporal_client, weft_config, scripted_server
):
    async with _stack(start_worker, temporal_client, weft_config, scripted_server) as stack:
        thread_id = await _thread(stack, "hello")
        await read_until(stack, thread_id, idle(1))
        terminated = await stack.http.post(
            f"/threads/{thread_id}/terminate", json={"reason": "done here"}
        )
        assert terminated.status_code == 202
        assert terminated.json() == {"threadId": thread_id, "status": "terminating"}
        result = await stack.ctx.threads.result(thread_id)
        assert result.status == "cancelled" and result.reason == "done here"

        unknown = f"thread-{uuid.uuid4().hex}"
        routes = [
            ("/messages", {"content": "x"}),
            ("/turns", {"content": "x"}),
            ("/actions/a1", {"decision": "deny"}),
            ("/queue/q1/remove", None),
            ("/queue/q1/promote", None),
            ("/terminate", {}),
        ]
        for suffix, body in routes:
            closed = await stack.http.post(f"/threads/{thread_id}{suffix}", json=body)
            assert closed.status_code == 409 and "closed" in closed.json()["error"], suffix
            missing = await stack.http.post(f"/threads/{unknown}{suffix}", json=body)
            assert missing.status_code == 404, (suffix, missing.text)

        # Bodies and headers are refused before anything is asked of the thread.
        messages = f"/threads/{thread_id}/messages"
        broken = await stack.http.post(
            messages, content=b"{", headers={"Content-Type": "application/json"}
        )
        assert broken.status_code == 400
        as_form = await stack.http.post(messages, data={"content": "x"})
        assert as_form.status_code == 415
        too_large = await stack.http.post(messages, json={"content": "z" * (1100 * 1024)})
        assert too_large.status_code == 413
        bad_key = await stack.http.post(
            messages, json={"content": "x"}, headers={"Idempotency-Key": ""}
        )
        assert bad_key.status_code == 400 and bad_key.json()["fields"] == ["Idempotency-Key"]
        async with httpx.AsyncClient(timeout=60, base_url=stack.url) as anonymous:
            for suffix, body in routes:
                reply = await anonymous.post(f"/threads/{thread_id}{suffix}", json=body)
                assert reply.status_code == 401, suffix

        # A terminate without a body is fine too.
        other = await _thread(stack, "hello")
        bare = await stack.http.post(f"/threads/{other}/terminate")
        assert bare.status_code == 202
        assert (await stack.ctx.threads.result(other)).status == "cancelled"
