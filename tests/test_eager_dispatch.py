"""A worker with the default config takes a quiet thread's activities eagerly: the gate
(workers/eager_gate.py) is installed, the SDK asks it, and Temporal starts the activities
with the workflow task's reply instead of through the matching service's queue."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from support import add_script, agent_definitions, idle_after, start_thread, wait_until
from temporalio.api.enums.v1 import EventType

from weft.workers.eager_gate import EagerWhenResponsive

EAGER_WITHIN = timedelta(milliseconds=1)


async def test_a_quiet_worker_takes_a_steps_activities_eagerly(
    start_worker: Any, temporal_client: Any, scripted_server: Any
) -> None:
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "Sunny."},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Weather?"}]
    )
    await wait_until(handle, idle_after(1))
    gate = worker.worker.config()["tuner"]._get_activity_task_slot_supplier()
    assert isinstance(gate, EagerWhenResponsive)

    # thread.init, two model calls and the tool call. An eager task is started in the
    # transaction that schedules it: its started event is timed within microseconds of the
    # scheduled one (22-240 us here), a polled one a matching round trip later (1.5-4.3 ms
    # here with eager dispatch off). Three of four, not all: a slow machine's first moments
    # may have the gate refuse one.
    history = await handle.fetch_history()
    scheduled = {
        e.event_id: e.event_time.ToDatetime()
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    }
    started = [
        (
            e.event_time.ToDatetime(),
            scheduled[e.activity_task_started_event_attributes.scheduled_event_id],
        )
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert len(started) == 4
    eager = sum(1 for at, scheduled_at in started if at - scheduled_at < EAGER_WITHIN)
    assert eager >= 3, f"only {eager} of 4 activities were started eagerly"
    assert gate.granted_eager >= eager
