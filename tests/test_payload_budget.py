"""Nothing the thread schedules exceeds its payload budget: oversized payloads become typed
errors naming the tool, message or signal, and many large messages reach the store first."""

from __future__ import annotations

import pytest
from support import add_script, agent_definitions, idle_after, read, start_thread, wait_until
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory, WorkflowUpdateFailedError
from temporalio.service import RPCError

from weft.contract.messages import MAX_QUEUED_CONTENT_CHARS

BUDGET = 1536 * 1024


def _largest_scheduled_input(history: WorkflowHistory) -> int:
    scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    return max(
        sum(len(p.data) for p in e.activity_task_scheduled_event_attributes.input.payloads)
        for e in history.events
        if e.event_type == scheduled
    )


async def test_tool_call_with_giant_arguments_gets_an_error_result(
    start_worker, temporal_client, scripted_server
):
    """A 1.7 MB tool call is not scheduled: its result is a payload_too_large error naming
    the tool, and the model is called again."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [{"name": "note", "arguments": {"text": "x" * 1_700_000}}],
                    "chunk_size": 100_000,
                },
                {"text": "understood"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "write"}]
    )
    state = await wait_until(handle, idle_after(1), timeout=60)
    assert state.last_outcome == "understood"
    failed = worker.store.events.read(handle.id, types=["tool.failed"])
    assert [e.payload["errorCode"] for e in failed] == ["payload_too_large"]
    assert "tool 'note' was not run" in failed[0].payload["message"]
    assert worker.store.values.get(handle.id, "notes") is None, "the tool ran"
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert tool.tool_status == "error" and "payload budget" in (tool.content or "")
    assert _largest_scheduled_input(await handle.fetch_history()) < BUDGET


async def test_many_large_queued_messages_reach_the_model_in_order(
    start_worker, temporal_client, scripted_server
):
    """Eight queued messages of 256 KiB each (2 MB together) are written to the store before
    the model call, which carries ids only; the model sees previews of them in order."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "hello", "replies": [{"text": "first", "delay_ms": 1500}]},
                {"match": "*", "replies": [{"text": "read them all"}]},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    await wait_until(handle, lambda s: s.status == "running")
    contents = [f"{i}:" + "y" * (MAX_QUEUED_CONTENT_CHARS - 10) for i in range(8)]
    for content in contents:
        await handle.signal("queue_message", {"role": "user", "content": content})
    state = await wait_until(handle, idle_after(2), timeout=60)
    assert state.last_outcome == "read them all" and state.warnings == 0
    stored = worker.store.messages.list(handle.id)
    assert [m.position for m in stored] == list(range(len(stored)))
    assert [m.content for m in stored if m.role == "user"] == ["hello", *contents]
    # Each is over the preview cap of a 128k model, so the model sees previews of them, in
    # order, within its budget (older ones may be summarised; the store keeps all).
    last = scripted_server.requests[-1]
    seen = [m["content"] for m in last["messages"] if m["role"] == "user"]
    previews = [text for text in seen if "…[weft: this output has" in text]
    assert len(previews) >= 2
    expected = [c.split(":", 1)[0] for c in contents][-len(previews) :]
    assert [text.split(":", 1)[0] for text in previews] == expected
    assert last["status"] == 200
    assert _largest_scheduled_input(await handle.fetch_history()) < 200_000


async def test_oversized_queued_messages_are_refused_naming_the_signal(
    start_worker, temporal_client, scripted_server
):
    """A 1.6 MB queue_message is dropped with a payload_too_large warning naming the signal;
    submit_turn refuses it with a typed error; the server refuses a 3 MB one outright."""
    script = add_script(scripted_server, {"replies": [{"text": "fine"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    big = {"role": "user", "content": "hi", "metadata": {"blob": "z" * 1_600_000}}
    await handle.signal("queue_message", big)
    state = await wait_until(handle, lambda s: s.warnings == 1)
    assert state.incidents[-1]["code"] == "payload_too_large"
    assert state.incidents[-1]["signal"] == "queue_message"
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update("submit_turn", big)
    assert getattr(refused.value.cause, "type", None) == "PayloadTooLarge"
    with pytest.raises(RPCError):
        await handle.signal("queue_message", {"role": "user", "content": "w" * 3_000_000})
    await handle.signal("queue_message", {"role": "user", "content": "small"})
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "fine" and not state.queue
    users = [m.content for m in worker.store.messages.list(handle.id) if m.role == "user"]
    assert users == ["small"]


async def test_start_message_over_budget_ends_the_turn_with_step_error(
    start_worker, temporal_client, scripted_server
):
    """A start message over the thread's payload budget is never sent: the turn ends with
    step_error naming the queued message, and the thread answers the next one."""
    script = add_script(scripted_server, {"replies": [{"text": "answered"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        options={"payloadBudgetBytes": 16 * 1024},
        messages=[{"role": "user", "content": "x" * 20_000}],
    )
    state = await wait_until(handle, lambda s: s.stop_reason == "step_error")
    assert "queued message q_" in (state.last_outcome or "")
    assert "payload budget" in (state.last_outcome or "")
    assert not [r for r in scripted_server.requests if r.get("model") == script]
    await handle.signal("queue_message", {"role": "user", "content": "short"})
    state = await wait_until(handle, lambda s: s.last_outcome == "answered")
    assert (await read(handle)).status == "waiting_input"
