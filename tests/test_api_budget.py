"""POST /threads/{id}/budget on a real stack: a spent budget stops the thread, the route
raises it and the stopped turn resumes; bad input, a retried key, unknown threads."""

from __future__ import annotations

import uuid

from api_support import api_stack, idle, read_until
from support import add_script

from weft.api.idempotency import REPLAYED_HEADER
from weft.definitions import Definitions, define_agent, define_model, define_prompt


def _definitions(script: str) -> Definitions:
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(name="chat", toolDescription="chats", model="scripted", prompt="Chat."),
        define_agent(name="chatter", sideA={"prompt": "chat"}),
    )


async def test_the_budget_route_raises_a_spent_budget_and_the_turn_resumes(
    start_worker, temporal_client, weft_config, scripted_server
):
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker = await start_worker(_definitions(script))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        started = await stack.http.post(
            "/threads",
            json={
                "agent": "chatter",
                "messages": ["hello"],
                "options": {"budget": {"maxModelCalls": 1}},
            },
        )
        assert started.status_code == 201, started.text
        thread_id = started.json()["threadId"]
        await read_until(stack, thread_id, idle(1))
        sent = await stack.http.post(f"/threads/{thread_id}/messages", json={"content": "again"})
        assert sent.status_code == 202, sent.text
        read = await read_until(stack, thread_id, idle(2))
        assert read["stopReason"] == "budget_exhausted"
        assert read["budget"]["blocked"] == "modelCalls"
        assert read["budget"]["spent"]["modelCalls"] == 1

        path = f"/threads/{thread_id}/budget"
        bad = await stack.http.post(path, json={"budget": {"maxModelCalls": 0}})
        assert bad.status_code == 422, bad.text
        assert "maxModelCalls" in bad.text
        empty = await stack.http.post(path, json={})
        assert empty.status_code == 422 and "at least one limit" in empty.text

        key = {"Idempotency-Key": f"budget-{uuid.uuid4()}"}
        raised = await stack.http.post(path, json={"budget": {"maxModelCalls": 3}}, headers=key)
        assert raised.status_code == 200, raised.text
        assert raised.json()["limits"]["maxModelCalls"] == 3 and raised.json()["blocked"] is None
        replay = await stack.http.post(path, json={"budget": {"maxModelCalls": 3}}, headers=key)
        assert replay.headers[REPLAYED_HEADER] == "true" and replay.json() == raised.json()

        # The stopped turn goes on by itself: one more call, answered.
        read = await read_until(stack, thread_id, idle(3))
        assert read["stopReason"] == "stop_on_response"
        assert read["budget"]["spent"]["modelCalls"] == 2
        answers = [m.content for m in stack.store.messages.list(thread_id) if m.role == "assistant"]
        assert answers == ["hi", "hi"]

        unknown = await stack.http.post(
            f"/threads/no-such-{uuid.uuid4().hex[:8]}/budget", json={"budget": {"maxTokens": 9}}
        )
        assert unknown.status_code == 404
