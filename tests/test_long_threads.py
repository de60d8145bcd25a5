"""Long threads continue as new at safe points and carry everything into the next run."""

from __future__ import annotations

import asyncio
from typing import Any

from support import (
    add_script,
    agent_definitions,
    assert_every_run_replays,
    idle_after,
    patch_markers,
    read,
    run_histories,
    start_thread,
    wait_until,
)
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause

from weft.contract.messages import MessagePage
from weft.workflows.agent_thread import TRUTHFUL_LOG_PATCH
from weft.workflows.definitions_refresh import DEFINITIONS_CHECK_PATCH, DEFINITIONS_VERSION_PATCH
from weft.workflows.history_gauge import GAUGE_PATCH
from weft.workflows.idle_watch import IDLE_PATCH
from weft.workflows.subagents.spawner import CHILD_ID_PATCH

# Twenty runs or so (a run continues as new at 200 events), with messages queued meanwhile:
# enough messages that a continue-as-new trims the carried index (CARRIED_INDEX), whatever
# the machine's load, so the paged `messages` query is checked past its trimmed start.
STEPS = 300


def long_script() -> dict[str, Any]:
    """A model that calls the note tool on every step, and answers a final question."""
    return {
        "turns": [
            {"match": "are you there?", "replies": [{"text": "still here"}]},
            {
                "match": "*",
                "replies": [
                    {"tool_calls": [{"name": "note", "arguments": {"text": "n"}}], "repeat": 2000}
                ],
            },
        ]
    }


def lost_messages_report(sent: list[str], stored: list[str], runs: list[Any]) -> str:
    """Which queued messages the store lacks, and where each run's history has their
    signal: enough to tell a lost signal from a run that dropped it."""
    missing = [text for text in sent if text not in stored]
    if not missing:
        return f"the stored user messages repeat or reorder those sent: {stored[1:]} != {sent}"
    seen: dict[str, list[str]] = {}
    for number, run in enumerate(runs):
        for event in run.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
                payloads = event.workflow_execution_signaled_event_attributes.input.payloads
                text = payloads[0].data.decode(errors="replace") if payloads else ""
                for lost in missing:
                    if f'"{lost}"' in text:
                        seen.setdefault(lost, []).append(f"run {number} event {event.event_id}")
    where = "; ".join(f"{m}: {', '.join(seen.get(m, ['no signal']))}" for m in missing)
    return f"{len(missing)} queued messages are not stored ({where}); {len(stored)} stored"


# Events a run is sent or that only carry workflow tasks, not its own commands' events.
NOT_OWN = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
}


def own_events_past(run: Any, budget: int) -> int:
    """How many events of its own (commands and their results) a run added after its
    history had reached `budget` events."""
    return sum(e.event_id > budget and e.event_type not in NOT_OWN for e in run.events)


async def test_a_long_turn_across_many_runs_loses_nothing(
    start_worker, temporal_client, scripted_server
):
    """A 300-step turn over many runs, with messages queued meanwhile, loses, repeats and
    reorders nothing, and the thread still answers afterwards."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, long_script())))
    started = await start_thread(
        temporal_client,
        worker.task_queue,
        options={"maxTotalSteps": STEPS, "continueAsNewEvents": 200},
        messages=[{"role": "user", "content": "take notes"}],
    )
    # Without a run id, signals and queries follow the thread into its newest run.
    handle = temporal_client.get_workflow_handle(started.id)
    sent: list[str] = []
    while len(sent) < 400 and (await read(handle)).counters.steps < STEPS // 2:
        # Bursts, so that some arrive while a run is continuing as new.
        batch = [f"m-{len(sent) + i}" for i in range(4)]
        for text in batch:
            await handle.signal("queue_message", {"role": "user", "content": text})
        sent.extend(batch)
        await asyncio.sleep(0.02)
    state = await wait_until(
        handle, lambda s: s.status == "waiting_input" and not s.queue, timeout=120
    )
    assert state.stop_reason == "max_total_steps" and state.counters.steps == STEPS
    print(f"{state.counters.runs} runs, {len(sent)} messages queued meanwhile")
    assert state.counters.runs >= 5, state.counters
    assert state.warnings == 0, state.incidents

    messages = worker.store.messages.list(started.id)
    assert [m.position for m in messages] == list(range(len(messages)))
    assert len({m.id for m in messages}) == len(messages)
    users = [m.content for m in messages if m.role == "user"]
    if users != ["take notes", *sent]:
        runs = await run_histories(temporal_client, started.id, started.first_execution_run_id)
        raise AssertionError(lost_messages_report(sent, users, runs))
    tools = [m for m in messages if m.role == "tool"]
    assert len(tools) == STEPS and all(m.tool_status == "success" for m in tools)
    assert len(worker.store.values.get(started.id, "notes")) == STEPS
    assert len(worker.store.events.read(started.id, types=["thread.started"])) == 1
    assert len(worker.store.events.read(started.id, types=["turn.started"])) == 1
    # Every enqueue was recorded, those a run carried unstored into the next one included.
    changes = worker.store.events.read(started.id, types=["queue.changed"], limit=10_000)
    enqueued = [e for e in changes if (e.payload or {}).get("action") == "enqueued"]
    assert len(enqueued) == len(sent) + 1

    runs = await run_histories(temporal_client, started.id, started.first_execution_run_id)
    # Idle is a safe point too: the thread may have continued as new once more since `state`
    # was read (CI saw 23 runs against 22), so count against the run it is in now.
    assert len(runs) == (await read(handle)).counters.runs
    continued = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
    assert all(r.events[-1].event_type == continued for r in runs[:-1])
    # A run reaches a safe point soon after its history passes 200 events. Signals (and the
    # workflow tasks they cost, a continue-as-new refused for them included) arrive at the
    # sender's pace, which the thread does not set: CI saw 313 events under load. So only
    # the events the run made itself count against the overshoot.
    overshoot = [own_events_past(run, 200) for run in runs]
    print(f"longest run {max(len(r.events) for r in runs)} events, own overshoot {overshoot}")
    assert max(overshoot) < 40, overshoot
    signaled = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    wt_failed = EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    # A run fetched the moment it began may hold only its started event (CI saw one).
    first = sum(len(r.events) > 1 and r.events[1].event_type == signaled for r in runs[1:])
    rejected = sum(
        e.event_type == wt_failed
        and e.workflow_task_failed_event_attributes.cause
        == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND
        for r in runs
        for e in r.events
    )
    print(f"signals during a transition: {first} in a first task, {rejected} rejected CAN")
    assert first + rejected >= 1, "no signal arrived during a transition"
    # Each run decides from the history gauge, asked for in its first workflow task: the
    # run's first command is that patch's marker, the truthful-log, child-id,
    # definitions-version, definitions-check and idle patches (asked once per run) follow in the
    # same task, no later patch marker is written.
    # (A patch asked for where a run decides could land where a replay does not ask.)
    scheduled = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    completed = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
    for run in runs:
        task_done = [e.event_id for e in run.events if e.event_type == completed]
        if not task_done or task_done[0] == run.events[-1].event_id:
            continue  # fetched before its first task had completed or had commands
        first_command = run.events[task_done[0]]  # ids count from 1: the event after it
        markers = patch_markers(run)
        assert [name for _, name in markers] == [
            GAUGE_PATCH,
            TRUTHFUL_LOG_PATCH,
            CHILD_ID_PATCH,
            DEFINITIONS_VERSION_PATCH,
            DEFINITIONS_CHECK_PATCH,
            IDLE_PATCH,
        ]
        assert markers[0][0] == first_command.event_id
        assert len(task_done) == 1 or markers[-1][0] < task_done[1]
        assert first_command.event_id < min(
            (e.event_id for e in run.events if e.event_type == scheduled), default=10**9
        )
    await assert_every_run_replays(temporal_client, started)

    await handle.signal("queue_message", {"role": "user", "content": "are you there?"})
    after = await wait_until(handle, idle_after(state.counters.turns + 1), timeout=30)
    assert after.last_outcome == "still here"
    stored = worker.store.messages.list(started.id)
    cursor = stored[-10].position
    page = await handle.query("messages", {"cursor": cursor, "limit": 50}, result_type=MessagePage)
    assert [m.id for m in page.messages] == [m.id for m in stored[-10:]]
    assert page.oldest_position is not None and page.oldest_position > 0
