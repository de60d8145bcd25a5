"""The context and history facts of 001: `context.resolved` per model call,
`history.window.loaded` / `history.reconstructed` for a compaction and a continued run;
through real threads, each event valid against the vendored schema."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    start_thread,
    store_of,
    wait_until,
)
from test_context_compaction import ask, chat_script, chat_thread

from weft.client.threads import Threads
from weft.contract.events import Event
from weft.contract.thread import SIGNAL_TERMINATE
from weft.workers.agent_worker import AgentWorker


def _assert_valid(events: list[Any]) -> None:
    validator = event_schema_validator()
    for event in events:
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"


async def _stored(
    worker: AgentWorker, thread_id: str, done: Callable[[list[Event]], object]
) -> list[Event]:
    """The thread's events once `done(events)` holds (the workflow's ride on later writes)."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        events = store_of(worker).events.read(thread_id, limit=10_000)
        if done(events):
            return events
        assert asyncio.get_running_loop().time() < deadline, [e.type for e in events]
        await asyncio.sleep(0.05)


def _idle_count(events: list[Any]) -> int:
    return sum(e.type == "thread.updated" and e.payload.get("status") == "idle" for e in events)


async def test_each_model_call_says_what_its_context_selected(
    start_worker, temporal_client, scripted_server
):
    """Each attempt writes one context.resolved with its attempt's ids: the messages its
    window selected by count, id and position, the budget, and no content."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Lisbon"}}]},
                {"text": "Sunny in Lisbon."},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    secret = "the-user-text-is-never-in-the-event"
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": secret}]
    )
    await wait_until(handle, idle_after(1))
    events = await _stored(worker, handle.id, lambda es: _idle_count(es) >= 1)
    requested = [e for e in events if e.type == "model.requested"]
    resolved = [e for e in events if e.type == "context.resolved"]
    assert [e.attempt_id for e in resolved] == [e.attempt_id for e in requested]
    assert len(resolved) == 2
    messages = worker.store.messages.list(handle.id)
    first, second = (e.payload for e in resolved)
    assert first["messages"] == 1 and first["pinnedMessages"] == 0
    assert first["firstMessageId"] == first["lastMessageId"] == messages[0].id
    assert first["firstPosition"] == first["lastPosition"] == 0
    assert first["boundary"] is None and first["model"] == "scripted"
    assert first["sentMessages"] == 2  # the system prompt, then the user's message
    assert second["messages"] == 3
    assert (second["firstPosition"], second["lastPosition"]) == (0, 2)
    assert second["lastMessageId"] == messages[2].id and messages[2].role == "tool"
    assert 0 < second["requestTokens"] <= second["promptBudget"]
    [completed] = [e for e in events if e.type == "model.completed"][-1:]
    assert completed.payload["context"]["requestTokens"] == second["requestTokens"]
    assert secret not in json.dumps([e.payload for e in resolved])
    _assert_valid(events)


async def test_a_compaction_loads_its_window_and_reconstructs_the_history(
    start_worker, temporal_client, scripted_server
):
    """A compaction writes history.window.loaded before it starts and history.reconstructed
    with its boundary; the next call's context.resolved names that boundary."""
    tool_turn = {
        "match": "please compact",
        "replies": [
            {"tool_calls": [{"name": "compact_now", "arguments": {"why": "done"}}]},
            {"text": "compacted"},
        ],
    }
    chat = await chat_thread(
        start_worker, temporal_client, scripted_server, chat_script(extra_turns=[tool_turn])
    )
    worker, thread_id, handle = chat.worker, chat.started.id, chat.handle
    state = await wait_until(handle, lambda s: s.status == "waiting_input")
    for turn in range(3):
        state = await ask(handle, f"turn {turn}", state.counters.turns)
    state = await ask(handle, "please compact", state.counters.turns)
    assert state.last_outcome == "compacted"
    events = await _stored(worker, thread_id, lambda es: _idle_count(es) >= 4)
    (boundary,) = worker.store.boundaries.list(thread_id)
    order = [e.type for e in events]
    [loaded] = [e for e in events if e.type == "history.window.loaded"]
    [rebuilt] = [e for e in events if e.type == "history.reconstructed"]
    assert order.index("history.window.loaded") < order.index("context.compaction.started")
    assert order.index("history.reconstructed") < order.index("context.compaction.completed")
    assert loaded.payload["reason"] == "compaction"
    assert loaded.payload["boundaryId"] == boundary.boundary_id
    assert loaded.payload["fromBoundaryId"] is None and loaded.payload["fromPosition"] == 0
    assert loaded.payload["firstPosition"] == 0
    assert loaded.payload["messages"] == loaded.payload["lastPosition"] + 1
    assert rebuilt.payload["boundaryId"] == boundary.boundary_id
    assert rebuilt.payload["firstKeptPosition"] == boundary.first_kept_position
    assert rebuilt.payload["summarisedMessages"] == boundary.summarised_messages > 0
    assert rebuilt.payload["kind"] == "summary" and rebuilt.payload["reason"] == "tool"
    after = [e for e in events if e.type == "context.resolved"][-1].payload
    assert after["boundary"]["boundaryId"] == boundary.boundary_id
    assert after["boundary"]["firstKeptPosition"] == boundary.first_kept_position
    assert after["firstPosition"] >= boundary.first_kept_position
    _assert_valid(events)


async def test_a_continued_run_says_which_window_it_starts_from(
    start_worker, temporal_client, scripted_server
):
    """Every run after the first writes history.window.loaded with its transition: its
    run, the run it continued, and the thread's messages so far."""
    script = add_script(scripted_server, {"turns": [{"match": "*", "replies": [{"text": "ok"}]}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, options={"continueAsNewEvents": 20}
    )
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    for n in range(5):
        await threads.submit_turn(handle.id, f"question {n}")
        await wait_until(handle, idle_after(n + 1))
    await handle.signal(SIGNAL_TERMINATE, {})
    await handle.result()
    events = worker.store.events.read(handle.id, limit=10_000)
    continued = [
        e for e in events if e.type == "thread.updated" and "continuedAsNew" in (e.payload or {})
    ]
    loaded = [e for e in events if e.type == "history.window.loaded"]
    assert continued, "the thread never continued as new"
    assert [e.run_id for e in loaded] == [e.run_id for e in continued]
    for transition, window in zip(continued, loaded, strict=True):
        came = transition.payload["continuedAsNew"]
        assert window.payload["reason"] == "continued_as_new"
        assert window.payload["run"] == came["run"]
        assert window.payload["previousRunId"] == came["previousRunId"]
        assert window.payload["boundaryId"] is None
        before = [e for e in events if e.sequence < window.sequence]
        stored = {e.payload["messageId"] for e in before if e.type == "model.completed"}
        assert window.payload["messages"] >= 2 * len(stored)  # a question and its answer each
    _assert_valid(events)
