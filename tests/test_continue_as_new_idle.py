"""An idle thread sheds its history: after `continueAsNewIdleSeconds` of quiet, a run that
has added a turn continues as new, so a wake replays the short new run, not the old one."""

from __future__ import annotations

import asyncio
import json

from subagent_support import family, start_boss
from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    read,
    run_histories,
    start_thread,
    stored_events,
    until,
    wait_until,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHistory

from weft.client.threads import Threads
from weft.contract.events import Event
from weft.contract.thread import REASON_IDLE, SIGNAL_TERMINATE
from weft.workers.agent_worker import AgentWorker

TIMER_STARTED = EventType.EVENT_TYPE_TIMER_STARTED
CONTINUED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW
ACTIVITY_SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
IN_FLIGHT = (
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    ACTIVITY_SCHEDULED,
    EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED,
)


async def settled_history(client: Client, workflow_id: str, run_id: str) -> WorkflowHistory:
    """The run's history once it waits with nothing in flight: no workflow task scheduled
    or running, and every activity it scheduled completed."""
    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        history = await handle.fetch_history()
        types = [e.event_type for e in history.events]
        if types[-1] not in IN_FLIGHT and types.count(ACTIVITY_SCHEDULED) == types.count(
            EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        ):
            return history
        assert asyncio.get_running_loop().time() < deadline, f"{run_id} never settled: {types}"
        await asyncio.sleep(0.05)


async def idle_continuations(worker: AgentWorker, thread_id: str, count: int) -> list[Event]:
    """The log's `continuedAsNew` transitions, once it holds `count` of them (bounded)."""

    def continued() -> list[Event]:
        updates = stored_events(worker, thread_id, "thread.updated")
        return [e for e in updates if "continuedAsNew" in (e.payload or {})]

    found: list[Event] = await until(
        lambda: len(c := continued()) >= count and c, f"{count} idle continuations"
    )
    return found


async def test_an_idle_thread_continues_as_new_once_and_answers_on_the_new_run(
    start_worker, temporal_client, scripted_server
):
    """A turn, then a second of quiet: the run continues as new, the new run records it
    (`reason: "idle"`), arms no timer of its own (it has run no turn), and its history is a
    fraction of the first run's; asked again, it answers with the whole conversation."""
    script = add_script(scripted_server, {"turns": [{"match": "*", "replies": [{"text": "ok"}]}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, options={"continueAsNewIdleSeconds": 1}
    )
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    await threads.submit_turn(handle.id, "first question")
    await wait_until(handle, idle_after(1))

    [continued] = await idle_continuations(worker, handle.id, 1)
    transition = continued.payload["continuedAsNew"]
    assert transition["reason"] == REASON_IDLE
    assert transition["run"] == 2
    first = handle.first_execution_run_id or ""
    assert transition["previousRunId"] == first
    event_schema_validator().validate(continued.to_wire())

    first_history, _ = await run_histories(temporal_client, handle.id, first)
    assert first_history.events[-1].event_type == CONTINUED
    assert any(e.event_type == TIMER_STARTED for e in first_history.events)
    second = await settled_history(temporal_client, handle.id, continued.run_id or "")
    assert not any(e.event_type == TIMER_STARTED for e in second.events), (
        "a run that has run no turn armed the idle timer"
    )
    assert len(second.events) * 2 < len(first_history.events), (
        len(second.events),
        len(first_history.events),
    )

    await threads.submit_turn(handle.id, "second question")
    state = await wait_until(handle, idle_after(2))
    assert state.counters.runs >= 2  # a third once this run's own quiet while has passed
    assert state.counters.turns == 2
    texts = [m.content for m in worker.store.messages.list(handle.id)]
    assert texts == ["first question", "ok", "second question", "ok"]
    await handle.signal(SIGNAL_TERMINATE, {})
    await handle.result()


async def test_an_idle_thread_without_the_option_arms_no_timer(
    start_worker, temporal_client, scripted_server
):
    """`continueAsNewIdleSeconds: null`: after its turn the run waits with no timer."""
    script = add_script(scripted_server, {"turns": [{"match": "*", "replies": [{"text": "ok"}]}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        options={"continueAsNewIdleSeconds": None},
        messages=[{"role": "user", "content": "a question"}],
    )
    await wait_until(handle, idle_after(1))
    history = await settled_history(temporal_client, handle.id, handle.first_execution_run_id or "")
    assert not any(e.event_type == TIMER_STARTED for e in history.events)
    assert history.events[-1].event_type != CONTINUED
    await handle.signal(SIGNAL_TERMINATE, {})
    await handle.result()


async def test_a_wake_leaves_the_timer_and_the_quiet_while_restarts(
    start_worker, temporal_client, scripted_server
):
    """A second turn asked while the first quiet while runs: the ask's workflow task cancels
    no timer, and the run continues as new a whole quiet while after the second turn."""
    # Long enough that the second turn is asked within the first quiet while even on a
    # loaded machine (were it not, the check below would still hold, testing less).
    quiet_seconds = 3
    script = add_script(scripted_server, {"turns": [{"match": "*", "replies": [{"text": "ok"}]}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, options={"continueAsNewIdleSeconds": quiet_seconds}
    )
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    await threads.submit_turn(handle.id, "first question")
    await wait_until(handle, idle_after(1))
    await threads.submit_turn(handle.id, "second question")
    await wait_until(handle, idle_after(2))
    continued = (await idle_continuations(worker, handle.id, 1))[0]

    first_history, _ = await run_histories(
        temporal_client, handle.id, handle.first_execution_run_id
    )
    events = first_history.events
    assert not any(e.event_type == EventType.EVENT_TYPE_TIMER_CANCELED for e in events)
    assert events[-1].event_type == CONTINUED
    # The run continued when its last timer fired: a whole quiet while after the last
    # activity before it, the second turn's. Had the first quiet while's timer continued
    # the run, the second turn would have ended less than `quiet_seconds` before it fired.
    last_fired = max(
        i for i, e in enumerate(events) if e.event_type == EventType.EVENT_TYPE_TIMER_FIRED
    )
    fired = events[last_fired].event_time.ToDatetime()
    second_turn_end = max(
        e.event_time.ToDatetime()
        for e in events[:last_fired]
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    )
    assert (fired - second_turn_end).total_seconds() >= quiet_seconds
    assert continued.payload["continuedAsNew"]["reason"] == REASON_IDLE
    await handle.signal(SIGNAL_TERMINATE, {})
    await handle.result()


async def test_a_resumable_subagent_continues_when_idle_and_still_answers_its_parent(
    start_worker, temporal_client, scripted_server
):
    """Parent and resumable child both continue as new when idle (the child inherits the
    option); the parent's next turn messages the child by name, and the child's new run
    answers it."""
    parent = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "go",
                    "replies": [
                        {
                            "tool_calls": [
                                {
                                    "name": "subagent_create",
                                    "arguments": {
                                        "agent": "researcher",
                                        "name": "ann",
                                        "message": "q1",
                                    },
                                }
                            ]
                        },
                        {"text": "first done"},
                    ],
                },
                {
                    "match": "again",
                    "replies": [
                        {
                            "tool_calls": [
                                {
                                    "name": "subagent_message",
                                    "arguments": {"reference": "ann", "message": "q2"},
                                }
                            ]
                        },
                        {"text": "second done"},
                    ],
                },
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": q,
                    "replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": r}}]}],
                }
                for q, r in (("q1", "r1"), ("q2", "r2"))
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"resumable": {"maxInstances": 1}}))
    handle = await start_boss(temporal_client, worker, options={"continueAsNewIdleSeconds": 1})
    state = await wait_until(handle, idle_after(1))
    [entry] = state.children
    child_id = entry["reference"]
    await idle_continuations(worker, child_id, 1)
    await idle_continuations(worker, handle.id, 1)

    await handle.signal("queue_message", {"role": "user", "content": "again"})
    state = await wait_until(handle, idle_after(2))
    assert worker.store is not None
    results = [
        json.loads(m.content) for m in worker.store.messages.list(handle.id) if m.role == "tool"
    ]
    assert [r["result"]["response"] for r in results] == ["r1", "r2"]
    [entry] = state.children
    assert entry["status"] == "idle"
    child_state = await read(temporal_client.get_workflow_handle(child_id))
    assert child_state.counters.turns == 2 and child_state.counters.runs >= 2
    await handle.signal(SIGNAL_TERMINATE, {})
    await handle.result()
