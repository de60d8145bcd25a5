"""`interrupt_turn` over HTTP (`POST /threads/{id}/interrupt`) and the Python API
(`Thread.interrupt`), on a real stack.

The thread waits on an ask_human question, so its turn cannot end by itself: whatever
the interrupt answers is the interrupt's doing, with no timing."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from api_support import api_stack, idle, read_until
from support import add_script, agent_definitions, event_schema_validator

import weft
from weft.api.idempotency import REPLAYED_HEADER

ASKING = {
    "turns": [
        {
            "match": "ask me",
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]}
            ],
        },
        {"match": "*", "replies": [{"text": "hi again"}]},
    ]
}


async def test_interrupt_route(start_worker, temporal_client, weft_config, scripted_server):
    """The route stops the running turn once per `Idempotency-Key` and answers `noop` when
    nothing runs; a bad body is 422 naming the field, an unknown thread 404, a closed 409."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASKING), tools=["ask_human"])
    )
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        started = await stack.http.post(
            "/threads", json={"agent": "helper", "messages": ["ask me"]}
        )
        thread_id = started.json()["threadId"]
        read = await read_until(stack, thread_id, lambda r: bool(r["pendingActions"]))
        path = f"/threads/{thread_id}/interrupt"
        bad = await stack.http.post(path, json={"turnId": ""})
        assert bad.status_code == 422 and bad.json()["fields"] == ["turnId"], bad.text
        other = await stack.http.post(path, json={"turnId": "turn_other"})
        assert other.status_code == 200 and other.json()["status"] == "noop", other.text
        key = {"Idempotency-Key": f"int-{uuid.uuid4()}"}
        first = await stack.http.post(path, json={"reason": "enough"}, headers=key)
        assert first.status_code == 200, first.text
        assert first.json() == {
            "status": "accepted",
            "turnId": read["activeTurnId"],
            "reason": "enough",
        }
        replay = await stack.http.post(path, json={"reason": "enough"}, headers=key)
        assert replay.headers[REPLAYED_HEADER] == "true" and replay.json() == first.json()
        after = await read_until(stack, thread_id, idle(1))
        assert after["pendingActions"] == [] and after["stopReason"] == "interrupted"
        bare = await stack.http.post(path)
        assert bare.json() == {"status": "noop", "turnId": None, "reason": "no turn is running"}
        missing = await stack.http.post(f"/threads/thread-{uuid.uuid4().hex}/interrupt")
        assert missing.status_code == 404
        await stack.ctx.threads.terminate(thread_id)
        await stack.ctx.threads.result(thread_id)
        closed = await stack.http.post(path, json={})
        assert closed.status_code == 409 and "closed" in closed.json()["error"]


async def test_thread_interrupt_in_python(start_worker, temporal_client, scripted_server):
    """`Thread.interrupt` stops the running turn and says which; the thread then answers."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, ASKING), tools=["ask_human"])
    )
    thread = await weft.Thread.start(
        temporal_client,
        "helper",
        messages=["ask me"],
        task_queue=worker.task_queue,
        store=worker.store,
    )
    for _ in range(400):
        read = await thread.read()
        if read.pending_actions:
            break
        await asyncio.sleep(0.05)
    assert read.pending_actions, "the question was not asked"
    result = await thread.interrupt(reason="later", turn_id=read.active_turn_id)
    assert (result.status, result.turn_id, result.reason) == (
        "accepted",
        read.active_turn_id,
        "later",
    )
    answer = await thread.ask("hello?")
    assert (answer.status, answer.response) == ("completed", "hi again")
    assert (await thread.interrupt()).status == "noop"
    validator = event_schema_validator()
    events: list[Any] = worker.store.events.read(thread.id, limit=10_000)
    for event in events:
        validator.validate(event.to_wire())
    await thread.terminate()
