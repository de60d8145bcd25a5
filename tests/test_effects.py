"""Scheduled effects on a live thread: timers that fire on idle and busy threads, removal,
continue-as-new, idempotent retries, the signals and updates, and their events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from effect_support import effect_definitions
from support import (
    add_script,
    event_schema_validator,
    idle_after,
    read,
    start_thread,
    wait_until,
)
from temporalio.client import WorkflowUpdateFailedError

from weft.contract.effects import (
    SIGNAL_SCHEDULE_EFFECT,
    UPDATE_REMOVE_EFFECT_CHECKED,
    UPDATE_SCHEDULE_EFFECT_CHECKED,
    RemoveEffectResult,
    ScheduleEffectResult,
)


async def schedule(handle: Any, name: str, args: dict[str, Any], delay_ms: int = 0) -> str:
    result: ScheduleEffectResult = await handle.execute_update(
        UPDATE_SCHEDULE_EFFECT_CHECKED,
        {"name": name, "args": args, "delayMs": delay_ms},
        result_type=ScheduleEffectResult,
    )
    assert result.status == "scheduled"
    return result.id


async def idle_thread(start_worker: Any, temporal_client: Any, script: str) -> tuple[Any, Any]:
    """A worker with the effect definitions on `script`, and an idle thread of it."""
    worker = await start_worker(effect_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, idle_after(0))
    return worker, handle


def jobs(store: Any, thread_id: str) -> list[tuple[str, str]]:
    """(event type, effect name) of the thread's effect events, in order."""
    return [
        (e.type, e.payload["effect"]["name"]) for e in store.events.read(thread_id, types=JOB_TYPES)
    ]


JOB_TYPES = ["job.created", "job.started", "job.completed", "job.failed", "job.cancelled"]


async def until_jobs(store: Any, thread_id: str, wanted: str, count: int = 1) -> None:
    for _ in range(400):
        if [t for t, _ in jobs(store, thread_id)].count(wanted) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {wanted} x{count}; effect events: {jobs(store, thread_id)}")


async def test_effect_from_a_tool_fires_on_the_idle_thread_and_starts_a_turn(
    start_worker, temporal_client, scripted_server
):
    """A tool schedules an effect; after the turn ends its timer fires, the effect runs with
    a ThreadState, and the message it queues starts a new turn (Runtime §2)."""
    plan = {"effect": "remind", "args": {"text": "reminder: stretch"}, "delay_ms": 1500}
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "remind me",
                    "replies": [
                        {"tool_calls": [{"name": "plan", "arguments": plan}]},
                        {"text": "I will remind you."},
                    ],
                },
                {"match": "reminder: stretch", "replies": [{"text": "Time to stretch!"}]},
            ]
        },
    )
    worker = await start_worker(effect_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "remind me"}]
    )
    state = await wait_until(handle, idle_after(1))
    [pending] = state.scheduled_effects
    assert pending["name"] == "remind" and pending["args"] == {"text": "reminder: stretch"}
    assert pending["scheduledBy"].startswith("thread state") and pending["due"] is False
    store = worker.store
    tool_result = json.loads(store.messages.list(handle.id)[2].content)
    # The tool saw its own effect listed at once, with the id it was given.
    assert tool_result["result"]["pending"][0]["id"] == tool_result["result"]["id"] == pending["id"]
    state = await wait_until(handle, idle_after(2), timeout=20)
    assert state.scheduled_effects == []
    contents = [(m.role, m.content) for m in store.messages.list(handle.id)]
    assert contents[-2:] == [("user", "reminder: stretch"), ("assistant", "Time to stretch!")]
    assert store.values.get(handle.id, "remind_runs") == 1
    assert store.values.get(handle.id, "remind_invoked") == "success"  # invoke_tool works
    assert jobs(store, handle.id) == [
        ("job.created", "remind"),
        ("job.started", "remind"),
        ("job.completed", "remind"),
    ]
    validator = event_schema_validator()
    for event in store.events.read(handle.id, types=JOB_TYPES):
        validator.validate(event.to_wire())
    [emitted] = store.events.read(handle.id, types=["run.status"])
    assert emitted.payload == {"event": "reminded", "data": {"text": "reminder: stretch"}}
    started = store.events.read(handle.id, types=["job.started"])[0]
    assert started.payload["lateMs"] >= 0
    assert store.effects.get(handle.id, pending["id"]).status == "completed"
    await handle.signal("terminate", {})


async def test_effect_due_while_a_step_runs_waits_for_the_step(
    start_worker, temporal_client, scripted_server
):
    """An effect scheduled (delay 0) while the model streams runs only once the step's tool
    result is stored, and what it queues joins the running turn's next model call."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "n"}}], "delay_ms": 1500},
                {"text": "done, with the reminder"},
            ]
        },
    )
    worker = await start_worker(effect_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "work"}]
    )
    await wait_until(handle, lambda s: s.status == "running")
    await asyncio.sleep(0.3)
    await schedule(handle, "remind", {"text": "from the effect"})
    state = await wait_until(handle, idle_after(1), timeout=20)
    assert state.counters.turns == 1, "the effect's message joined the running turn"
    store = worker.store
    events = store.events.read(handle.id)
    sequence = {e.type: e.sequence for e in reversed(events)}  # the first of each type
    tool_done = next(e.sequence for e in events if e.type == "tool.result")
    effect_started = next(e.sequence for e in events if e.type == "job.started")
    second_call = [e.sequence for e in events if e.type == "model.requested"][1]
    assert sequence["model.completed"] < tool_done < effect_started < second_call
    requests = [r for r in scripted_server.requests if r["model"] == script]
    assert requests[1]["messages"][-1] == {"role": "user", "content": "from the effect"}
    await handle.signal("terminate", {})


async def test_removed_effect_never_fires_and_its_timer_is_cancelled(
    start_worker, temporal_client, scripted_server
):
    """Removing a pending effect cancels its Temporal timer; it never runs."""
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    effect_id = await schedule(handle, "remind", {"text": "never"}, delay_ms=1200)
    assert [e["id"] for e in (await read(handle)).scheduled_effects] == [effect_id]
    removed = await handle.execute_update(
        UPDATE_REMOVE_EFFECT_CHECKED, {"id": effect_id}, result_type=RemoveEffectResult
    )
    assert removed.removed is True
    again = await handle.execute_update(
        UPDATE_REMOVE_EFFECT_CHECKED, {"id": effect_id}, result_type=RemoveEffectResult
    )
    assert again.removed is False
    await asyncio.sleep(2.0)
    state = await read(handle)
    assert state.scheduled_effects == [] and state.counters.turns == 0
    store = worker.store
    await until_jobs(store, handle.id, "job.cancelled")
    assert jobs(store, handle.id) == [("job.created", "remind"), ("job.cancelled", "remind")]
    assert store.values.get(handle.id, "remind_runs") is None
    history = await handle.fetch_history()
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert "timer_started_event_attributes" in kinds
    assert "timer_canceled_event_attributes" in kinds
    assert "timer_fired_event_attributes" not in kinds
    await handle.signal("terminate", {})


async def test_tools_list_and_remove_effects(start_worker, temporal_client, scripted_server):
    """ThreadState: a tool lists pending effects by name and removes one; a removed or
    unknown id answers False."""
    body = {
        "turns": [
            {
                "match": "list",
                "replies": [
                    {"tool_calls": [{"name": "list_effects", "arguments": {"name": "remind"}}]},
                    {"text": "listed"},
                ],
            },
            {
                "match": "cancel",
                "replies": [
                    {
                        "tool_calls": [
                            {"name": "cancel_effect", "arguments": {"id": "ID"}},
                            {"name": "cancel_effect", "arguments": {"id": "ID"}},
                            {"name": "cancel_effect", "arguments": {"id": "eff_nope"}},
                        ]
                    },
                    {"text": "cancelled"},
                ],
            },
        ]
    }
    script = add_script(scripted_server, body)
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    first = await schedule(handle, "remind", {"text": "a"}, delay_ms=60_000)
    await schedule(handle, "flaky", {}, delay_ms=60_000)
    await handle.signal("queue_message", {"role": "user", "content": "list"})
    await wait_until(handle, idle_after(1))
    store = worker.store
    listed = json.loads(store.messages.list(handle.id)[2].content)["result"]
    assert [(e["id"], e["name"], e["args"]) for e in listed] == [(first, "remind", {"text": "a"})]
    assert set(listed[0]) == {"id", "name", "args", "scheduledAt", "createdAt"}
    # The cancel script names the id found above.
    scripted_server.set_script(script, json.loads(json.dumps(body).replace("ID", first)))
    await handle.signal("queue_message", {"role": "user", "content": "cancel"})
    await wait_until(handle, idle_after(2))
    results = [
        json.loads(m.content)["result"]
        for m in store.messages.list(handle.id)
        if m.role == "tool" and m.name == "cancel_effect"
    ]
    assert results == [{"removed": True}, {"removed": False}, {"removed": False}]
    assert [e["name"] for e in (await read(handle)).scheduled_effects] == ["flaky"]
    await handle.signal("terminate", {})


async def test_retried_effect_does_not_duplicate_its_writes(
    start_worker, temporal_client, scripted_server
):
    """An effect that writes and then raises is retried by Temporal; the failed attempt's
    writes were never committed, so the value, the event and the outcome exist once."""
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    await schedule(handle, "flaky", {"fail_attempts": 1})
    store = worker.store
    await until_jobs(store, handle.id, "job.completed")
    assert store.values.get(handle.id, "flaky_count") == 1
    emitted = store.events.read(handle.id, types=["run.status"])
    assert [e.payload["data"] for e in emitted] == [{"count": 1}]
    [done] = store.events.read(handle.id, types=["job.completed"])
    assert done.payload["attempt"] == 2 and done.payload["result"] == "count 1"
    await handle.signal("terminate", {})


async def test_effect_that_keeps_failing_is_recorded_and_the_thread_goes_on(
    start_worker, temporal_client, scripted_server
):
    """After its attempts an effect's failure is a job.failed event and an incident; none of
    its writes land, and the thread still answers."""
    script = add_script(scripted_server, {"replies": [{"text": "still here"}]})
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    await schedule(handle, "flaky", {"fail_attempts": 99})
    store = worker.store
    await until_jobs(store, handle.id, "job.failed")
    [failed] = store.events.read(handle.id, types=["job.failed"])
    assert failed.payload["code"] == "effect_exception"
    assert "flaky effect failed on purpose" in failed.payload["error"]
    assert store.values.get(handle.id, "flaky_count") is None
    assert store.events.read(handle.id, types=["run.status"]) == []
    await handle.signal("queue_message", {"role": "user", "content": "hello?"})
    state = await wait_until(handle, idle_after(1), timeout=20)
    assert any(i["code"] == "effect_failed" for i in state.incidents)
    await handle.signal("terminate", {})


async def test_effect_fires_after_the_thread_continued_as_new(
    start_worker, temporal_client, scripted_server
):
    """A pending effect is carried into the next run with its due time and fires there."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "chat", "replies": [{"text": "chatting"}]},
                {"match": "later", "replies": [{"text": "it is later"}]},
            ]
        },
    )
    worker = await start_worker(effect_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, options={"continueAsNewEvents": 40}
    )
    await wait_until(handle, idle_after(0))
    first_run = (await handle.describe()).run_id
    effect_id = await schedule(handle, "remind", {"text": "later"}, delay_ms=4000)
    for turn in range(1, 4):
        await handle.signal("queue_message", {"role": "user", "content": f"chat {turn}"})
        await wait_until(handle, idle_after(turn), timeout=20)
    state = await wait_until(handle, lambda s: s.counters.runs >= 1, timeout=20)
    assert (await handle.describe()).run_id != first_run
    assert [e["id"] for e in state.scheduled_effects] == [effect_id]
    state = await wait_until(handle, idle_after(4), timeout=30)
    store = worker.store
    assert store.messages.list(handle.id)[-1].content == "it is later"
    assert ("job.completed", "remind") in jobs(store, handle.id)
    await handle.signal("terminate", {})


async def test_an_effect_schedules_another(start_worker, temporal_client, scripted_server):
    """Effects reach the whole ThreadState, scheduling effects included."""
    script = add_script(scripted_server, {"replies": [{"text": "chained"}]})
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    await schedule(handle, "chain", {"then": "second link", "delay_ms": 200})
    await wait_until(handle, idle_after(1), timeout=20)
    assert jobs(worker.store, handle.id) == [
        ("job.created", "chain"),
        ("job.started", "chain"),
        ("job.completed", "chain"),
        ("job.created", "remind"),
        ("job.started", "remind"),
        ("job.completed", "remind"),
    ]
    assert worker.store.messages.list(handle.id)[0].content == "second link"
    await handle.signal("terminate", {})


async def test_bad_effect_requests_get_clear_errors(start_worker, temporal_client, scripted_server):
    """Unknown effects, bad delays and malformed payloads are refused by the update's
    validator, warned by the signal, and raised to the tool; nothing is scheduled."""
    plan = {"effect": "nonexistent", "args": {}}
    bad_args = {"effect": "flaky", "args": {"fail_attempts": -1}}
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "plan", "arguments": plan},
                        {"name": "plan", "arguments": bad_args},
                    ]
                },
                {"text": "refused"},
            ]
        },
    )
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    refused = {
        "unknown effect 'nonexistent'; this thread's effects: chain, flaky, nap, remind": {
            "name": "nonexistent"
        },
        "delayMs": {"name": "remind", "delayMs": -5},
        "name": {"args": {}},
        "args": {"name": "remind", "args": "not an object"},
    }
    for fragment, payload in refused.items():
        with pytest.raises(WorkflowUpdateFailedError) as failure:
            await handle.execute_update(UPDATE_SCHEDULE_EFFECT_CHECKED, payload)
        assert fragment in str(failure.value.cause), (fragment, failure.value.cause)
    await handle.signal(SIGNAL_SCHEDULE_EFFECT, {"name": "nonexistent"})
    await handle.signal(SIGNAL_SCHEDULE_EFFECT, "not an object")
    state = await wait_until(handle, lambda s: s.warnings >= 2)
    codes = [i["code"] for i in state.incidents]
    assert "unknown_effect" in codes and "malformed_signal" in codes
    await handle.signal("queue_message", {"role": "user", "content": "plan"})
    state = await wait_until(handle, idle_after(1))
    errors = [
        json.loads(m.content)["error"]
        for m in worker.store.messages.list(handle.id)
        if m.role == "tool"
    ]
    assert "unknown effect 'nonexistent'; effects: chain, flaky, nap, remind" in errors[0]
    assert "invalid arguments for effect 'flaky'" in errors[1] and "fail_attempts" in errors[1]
    assert state.scheduled_effects == []
    assert jobs(worker.store, handle.id) == []
    await handle.signal("terminate", {})


async def test_terminate_cancels_pending_effects(start_worker, temporal_client, scripted_server):
    """A terminated thread runs no more effects: each pending one is cancelled."""
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    await schedule(handle, "remind", {"text": "x"}, delay_ms=500)
    await handle.signal("terminate", {})
    await handle.result()
    await asyncio.sleep(0.8)
    assert jobs(worker.store, handle.id) == [("job.created", "remind"), ("job.cancelled", "remind")]
    [cancelled] = worker.store.events.read(handle.id, types=["job.cancelled"])
    assert cancelled.payload["reason"] == "thread terminated"


async def test_terminate_while_an_effect_runs_cancels_it(
    start_worker, temporal_client, scripted_server
):
    """Terminate cancels a running effect's activity; its staged writes never land."""
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker, handle = await idle_thread(start_worker, temporal_client, script)
    await schedule(handle, "nap", {"seconds": 30})
    store = worker.store
    await until_jobs(store, handle.id, "job.started")
    await handle.signal("terminate", {})
    await asyncio.wait_for(handle.result(), 20)
    assert jobs(store, handle.id) == [
        ("job.created", "nap"),
        ("job.started", "nap"),
        ("job.cancelled", "nap"),
    ]
    assert store.values.get(handle.id, "napped") is None
