"""Messages that arrive while a turn runs: enqueue, interrupt, reject, remove and promote."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import jsonschema
from support import (
    EVENT_SCHEMA,
    add_script,
    agent_definitions,
    idle_after,
    read,
    start_thread,
    wait_until,
)
from temporalio.api.enums.v1 import EventType

SLOW_THEN_QUICK = {
    "turns": [
        {
            "match": "slow",
            "replies": [
                {"text": "This reply takes its time " * 4, "chunk_size": 4, "chunk_delay_ms": 150}
            ],
        },
        {"match": "*", "replies": [{"text": "quick answer"}]},
    ]
}


async def _until_event(worker: Any, thread_id: str, event_type: str) -> None:
    for _ in range(600):
        if worker.store.events.read(thread_id, types=[event_type]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {event_type} event for {thread_id}")


def _assert_events_valid(worker: Any, thread_id: str) -> None:
    validator = jsonschema.Draft202012Validator(
        json.loads(EVENT_SCHEMA.read_text()),
        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER,
    )
    for event in worker.store.events.read(thread_id, limit=10_000):
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"


def _queue_actions(worker: Any, thread_id: str) -> list[str]:
    events = worker.store.events.read(thread_id, types=["queue.changed"], limit=1000)
    return [e.payload["action"] for e in events]


async def test_interrupt_cancels_the_in_flight_model_call(
    start_worker, temporal_client, scripted_server
):
    """submit_turn with policy interrupt cancels the streaming call and restarts the step."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "slow please"}]
    )
    await _until_event(worker, handle.id, "model.delta")
    result = await handle.execute_update(
        "submit_turn", {"role": "user", "content": "never mind", "policy": "interrupt"}
    )
    assert result["status"] == "queued"
    state = await wait_until(handle, idle_after(1))
    assert state.counters.turns == 1 and state.last_outcome == "quick answer"
    messages = worker.store.messages.list(handle.id)
    assert [(m.role, m.content) for m in messages] == [
        ("user", "slow please"),
        ("user", "never mind"),
        ("assistant", "quick answer"),
    ]
    assert [m.position for m in messages] == sorted(m.position for m in messages)
    assert "interrupt" in _queue_actions(worker, handle.id)
    failed = worker.store.events.read(handle.id, types=["model.failed"])
    assert [e.payload["code"] for e in failed] == ["interrupted"]
    # The cancelled model.call is in history: requested, then acknowledged by the activity.
    for _ in range(200):
        history = await handle.fetch_history()
        types = [e.event_type for e in history.events]
        if EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in types:
            break
        await asyncio.sleep(0.05)
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED in types
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED in types
    scheduled = {
        e.event_id: e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    cancelled = [
        scheduled[e.activity_task_canceled_event_attributes.scheduled_event_id]
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED
    ]
    assert cancelled == ["model.call"]
    _assert_events_valid(worker, handle.id)
    await handle.signal("terminate", {})


async def test_reject_policy_refuses_while_busy(start_worker, temporal_client, scripted_server):
    """policy reject refuses a message while a turn runs, with the reason, and accepts when idle."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "slow please"}]
    )
    await _until_event(worker, handle.id, "model.delta")
    refused = await handle.execute_update(
        "submit_turn", {"role": "user", "content": "hurry", "policy": "reject"}
    )
    assert refused["status"] == "rejected"
    assert refused["reason"].startswith("policy 'reject': the thread is busy (running, turn ")
    assert (await read(handle)).queue == []
    await wait_until(handle, idle_after(1))
    accepted = await handle.execute_update(
        "submit_turn", {"role": "user", "content": "now", "policy": "reject"}
    )
    assert accepted["status"] == "accepted"
    await wait_until(handle, idle_after(2))
    assert _queue_actions(worker, handle.id).count("rejected") == 1
    _assert_events_valid(worker, handle.id)
    await handle.signal("terminate", {})


async def test_remove_and_promote_queued_turns(start_worker, temporal_client, scripted_server):
    """remove_queued_turn and promote_queued_turn reorder the queue; unknown ids only warn."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "slow please"}]
    )
    await _until_event(worker, handle.id, "model.delta")
    for text in ("first", "second", "third"):
        await handle.signal("queue_message", {"role": "user", "content": text})
    queued = (await wait_until(handle, lambda s: len(s.queue) == 3)).queue
    await handle.signal("promote_queued_turn", {"queueId": queued[2].queue_id})
    await handle.signal("remove_queued_turn", {"queueId": queued[0].queue_id})
    await handle.signal("remove_queued_turn", {"queueId": "q_missing"})
    await handle.signal("promote_queued_turn", {"queue_id": 5})
    state = await wait_until(handle, lambda s: s.warnings == 2)
    if state.queue:  # still running the slow turn
        assert [q.queue_id for q in state.queue] == [queued[2].queue_id, queued[1].queue_id]
    await wait_until(handle, idle_after(2))
    users = [m.content for m in worker.store.messages.list(handle.id) if m.role == "user"]
    assert users == ["slow please", "third", "second"]
    actions = _queue_actions(worker, handle.id)
    assert actions.count("promoted") == 1 and actions.count("removed") == 1
    _assert_events_valid(worker, handle.id)
    await handle.signal("terminate", {})
