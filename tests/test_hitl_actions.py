"""The ask_human tool and answers to actions: by update, by signal, malformed or late."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support import add_script, agent_definitions, idle_after, read, start_thread, wait_until
from temporalio.client import WorkflowUpdateFailedError

from weft.client import actions
from weft.definitions import Definitions, define_agent, define_model, define_prompt

ASK_THEN_REPLY = {
    "replies": [
        {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]},
        {"text": "Thanks, noted."},
    ]
}


def _ask_definitions(script: str, options: dict[str, Any] | None = None) -> Definitions:
    tool: Any = {"name": "ask_human", "options": options} if options else "ask_human"
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="asker", toolDescription="asks", model="scripted", prompt="Ask.", tools=[tool]
        ),
        define_agent(name="helper", sideA={"prompt": "asker"}),
    )


async def _pending(handle: Any) -> dict[str, Any]:
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    return state.pending_actions[0]


async def test_ask_human_answer_becomes_the_tool_result(
    start_worker, temporal_client, scripted_server, dev_server
):
    """ask_human puts the thread in waiting_input with a flagged action; the answer is the result."""
    worker = await start_worker(_ask_definitions(add_script(scripted_server, ASK_THEN_REPLY)))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    action = await _pending(handle)
    state = await read(handle)
    assert state.status == "waiting_input" and state.active_turn_id is not None
    assert (action["kind"], action["prompt"], action["decisions"]) == (
        "ask_human",
        "Which city?",
        ["answer", "deny"],
    )
    # Visibility is eventually consistent; the flag is asserted once it is indexed.
    for _ in range(100):
        if handle.id in await actions.waiting_threads(temporal_client, "ask_human"):
            break
        await asyncio.sleep(0.1)
    assert handle.id in await actions.waiting_threads(temporal_client, agent="helper")
    assert handle.id not in await actions.waiting_threads(temporal_client, "tool_permission")
    (required,) = [
        e for e in worker.store.events.read(handle.id, limit=1000) if e.type == "action.required"
    ]
    assert required.action_id == action["actionId"]
    assert required.payload["actionType"] == "ask_human"
    answer = actions.response(action["actionId"], "answer", answer="Lisbon")
    result = await actions.respond_checked(temporal_client, handle.id, answer)
    assert (result.action_id, result.decision) == (action["actionId"], "answer")
    await wait_until(handle, idle_after(1))
    for _ in range(100):  # the flag is cleared once the answer is in
        if handle.id not in await actions.waiting_threads(temporal_client):
            break
        await asyncio.sleep(0.1)
    assert handle.id not in await actions.waiting_threads(temporal_client)
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert tool.tool_status == "success" and '"result":"Lisbon"' in tool.content
    resolved = [
        e for e in worker.store.events.read(handle.id, limit=1000) if e.type == "action.resolved"
    ]
    assert [(e.payload["decidedBy"], e.payload["answer"]) for e in resolved] == [
        ("human", "Lisbon")
    ]
    await handle.signal("terminate", {})


async def test_ask_human_times_out_with_its_default(start_worker, temporal_client, scripted_server):
    """An ask_human with a timeout and a default answers itself with the default on expiry."""
    script = add_script(scripted_server, ASK_THEN_REPLY)
    worker = await start_worker(
        _ask_definitions(script, {"timeoutSeconds": 1, "default": "nobody knows"})
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1))
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert '"result":"nobody knows"' in tool.content
    (resolved,) = [
        e for e in worker.store.events.read(handle.id, limit=1000) if e.type == "action.resolved"
    ]
    assert resolved.payload["decidedBy"] == "timeout" and resolved.payload["decision"] == "answer"
    await handle.signal("terminate", {})


def _malformed(action_id: str) -> list[tuple[Any, ...]]:
    return [
        (),
        ("a string",),
        (42,),
        (None,),
        ([action_id, "approve"],),
        ({},),
        ({"actionId": action_id},),
        ({"actionId": 7, "decision": "approve"},),
        ({"actionId": action_id, "decision": "maybe"},),
        ({"actionId": action_id, "decision": "approve", "answer": "x"},),
        ({"actionId": action_id, "decision": "deny", "scope": "session"},),
        ({"actionId": action_id, "decision": "approve", "bogus": True},),
        ({"actionId": action_id, "decision": "answer", "answer": "not a question"},),
        ({"actionId": "act_unknown", "decision": "approve"},),
        ({"actionId": action_id, "decision": "approve"}, {"extra": 1}),
    ]


async def test_malformed_respond_action_payloads_change_nothing(
    start_worker, temporal_client, scripted_server
):
    """Fifteen malformed or unanswerable respond_action signals only add warnings."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "done"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script, permissions={"mode": "default"}))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    action = await _pending(handle)
    before = await read(handle)
    payloads = _malformed(action["actionId"])
    for args in payloads:
        await handle.signal("respond_action", args=list(args))
    after = await wait_until(handle, lambda s: s.warnings == before.warnings + len(payloads))
    assert after.status == "waiting_permission"
    assert after.pending_actions == before.pending_actions
    assert after.counters == before.counters
    for args in payloads[1:]:
        with pytest.raises(WorkflowUpdateFailedError):
            await handle.execute_update("respond_action_checked", args=list(args))
    assert (await read(handle)).pending_actions == before.pending_actions
    resolved = [
        e for e in worker.store.events.read(handle.id, limit=1000) if e.type == "action.resolved"
    ]
    assert resolved == []
    await handle.signal("respond_action", {"actionId": action["actionId"], "decision": "approve"})
    await wait_until(handle, idle_after(1))
    await handle.signal("terminate", {})


async def test_checked_update_names_what_is_wrong(start_worker, temporal_client, scripted_server):
    """respond_action_checked rejects unknown ids and wrong decisions with a clear message."""
    worker = await start_worker(_ask_definitions(add_script(scripted_server, ASK_THEN_REPLY)))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    action = await _pending(handle)
    cases = [
        ({"actionId": "act_nope", "decision": "deny"}, "no pending action 'act_nope'"),
        (
            {"actionId": action["actionId"], "decision": "approve"},
            "cannot answer ask_human action",
        ),
        ({"actionId": action["actionId"], "decision": "answer"}, "needs an 'answer'"),
        ({"decision": "deny"}, "field 'actionId'"),
    ]
    for payload, message in cases:
        with pytest.raises(WorkflowUpdateFailedError) as failed:
            await handle.execute_update("respond_action_checked", payload)
        assert message in str(failed.value.cause), str(failed.value.cause)
    await handle.execute_update(
        "respond_action_checked",
        {"actionId": action["actionId"], "decision": "deny", "reason": "private"},
    )
    await wait_until(handle, idle_after(1))
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert "the human declined to answer: private" in tool.content
    await handle.signal("terminate", {})


async def test_terminate_while_waiting_resolves_the_action(
    start_worker, temporal_client, scripted_server
):
    """terminate ends a wait for a human: the action resolves as terminated, the tool aborts."""
    worker = await start_worker(_ask_definitions(add_script(scripted_server, ASK_THEN_REPLY)))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    action = await _pending(handle)
    await handle.signal("terminate", {"reason": "nobody is around"})
    await handle.result()
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert '"error_code":"aborted"' in tool.content
    events = worker.store.events.read(handle.id, limit=1000)
    (resolved,) = [e for e in events if e.type == "action.resolved"]
    assert resolved.action_id == action["actionId"]
    assert resolved.payload["decidedBy"] == "terminate"
    final = await read(handle)
    assert final.status == "cancelled" and final.pending_actions == []
