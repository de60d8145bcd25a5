"""`interrupt_turn` (001): the running turn stops without a new message, the thread stays
open; also `turn.submitted` and `session.created` / `session.updated`.

A real dev server and the scripted model server; the interrupt arrives during a slow model
reply, a tool call, a permission ask, or when there is nothing to stop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from prompt_tool_support import prompt_tool_definitions
from support import (
    WaitArgs,
    add_script,
    agent_definitions,
    assert_every_run_replays,
    event_schema_validator,
    idle_after,
    read,
    start_thread,
    stored_events,
    until,
    wait_for_cancel,
    wait_until,
)
from temporalio.client import WorkflowUpdateFailedError

from weft.client.threads import Threads
from weft.definitions import define_tool

SLOW = {"chunk_size": 4, "chunk_delay_ms": 150}
SLOW_THEN_QUICK = {
    "turns": [
        {"match": "slow", "replies": [{"text": "This reply takes its time " * 4, **SLOW}]},
        {"match": "*", "replies": [{"text": "quick answer"}]},
    ]
}


def _assert_valid(worker: Any, thread_id: str) -> None:
    validator = event_schema_validator()
    for event in stored_events(worker, thread_id):
        validator.validate(event.to_wire())


def _interrupted_turn(worker: Any, thread_id: str) -> dict[str, Any]:
    ended = [e for e in stored_events(worker, thread_id, "turn.completed", "turn.failed")]
    stopped = [e for e in ended if e.payload.get("stopReason") == "interrupted"]
    assert len(stopped) == 1, [(e.type, e.payload) for e in ended]
    assert stopped[0].type == "turn.completed"
    return {"turnId": stopped[0].turn_id, **stopped[0].payload}


async def _interrupt(handle: Any, **payload: Any) -> dict[str, Any]:
    result: dict[str, Any] = await handle.execute_update("interrupt_turn", payload)
    return result


async def test_interrupt_during_a_slow_model_reply(start_worker, temporal_client, scripted_server):
    """The streaming model call is cancelled, the turn ends `interrupted`, the thread goes
    idle, keeps the user's message, and answers the next one normally."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    handle = await start_thread(temporal_client, worker.task_queue)
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    asking = asyncio.create_task(threads.ask(handle.id, "slow please"))
    await until(lambda: stored_events(worker, handle.id, "model.delta"), "the reply streams")
    running = (await read(handle)).active_turn_id
    result = await _interrupt(handle, reason="changed my mind")
    assert result == {"status": "accepted", "turnId": running, "reason": "changed my mind"}
    turn = await asyncio.wait_for(asking, timeout=30)
    assert (turn.status, turn.stop_reason) == ("cancelled", "interrupted")
    assert turn.error == "interrupted: changed my mind"
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "interrupted" and state.active_turn_id is None
    ended = _interrupted_turn(worker, handle.id)
    assert ended["turnId"] == running
    assert (ended["status"], ended["reason"]) == ("cancelled", "changed my mind")
    failed = stored_events(worker, handle.id, "model.failed")
    assert [e.payload["code"] for e in failed] == ["interrupted"]
    answer = await threads.ask(handle.id, "and now?")
    assert (answer.status, answer.response) == ("completed", "quick answer")
    messages = [(m.role, m.content) for m in worker.store.messages.list(handle.id)]
    assert messages == [
        ("user", "slow please"),
        ("user", "and now?"),
        ("assistant", "quick answer"),
    ]
    _assert_valid(worker, handle.id)
    await handle.signal("terminate", {})
    await asyncio.wait_for(handle.result(), timeout=60)
    await assert_every_run_replays(temporal_client, handle)


async def test_interrupt_during_a_tool_call(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """The running tool's activity is cancelled and the call recorded aborted, later calls
    of the step are not run, and the thread stays open and answers the next message."""
    note = tmp_path / "tool-cancelled"
    waiting = {"name": "wait_for_cancel", "arguments": {"note": str(note)}}
    weather = {"name": "weather", "arguments": {"city": "Oslo"}}
    script = {
        "turns": [
            {"match": "wait", "replies": [{"tool_calls": [waiting, weather]}]},
            {"match": "*", "replies": [{"text": "fresh answer"}]},
        ]
    }
    definitions = agent_definitions(
        add_script(scripted_server, script), tools=["wait_for_cancel", "weather"]
    ).add(
        define_tool(
            name="wait_for_cancel",
            description="Waits until cancelled",
            args=WaitArgs,
            execute=wait_for_cancel,
        )
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "wait"}]
    )
    started = await until(lambda: stored_events(worker, handle.id, "tool.started"), "the call runs")
    result = await _interrupt(handle)
    assert (result["status"], result["reason"]) == ("accepted", None)
    await until(lambda: note.exists(), "the tool saw its activity cancelled")
    await wait_until(handle, idle_after(1))
    failed = stored_events(worker, handle.id, "tool.failed")
    assert [(e.tool_call_id, e.payload["errorCode"], e.payload["message"]) for e in failed] == [
        (started[0].tool_call_id, "aborted", "not finished: the turn was interrupted"),
        (failed[1].tool_call_id, "aborted", "not run: the turn was interrupted"),
    ]
    assert not stored_events(worker, handle.id, "tool.result")
    assert _interrupted_turn(worker, handle.id)["reason"] is None
    await handle.signal("queue_message", {"role": "user", "content": "still there?"})
    state = await wait_until(handle, idle_after(2))
    assert state.last_outcome == "fresh answer" and state.stop_reason == "stop_on_response"
    _assert_valid(worker, handle.id)
    await handle.signal("terminate", {})
    await asyncio.wait_for(handle.result(), timeout=60)
    await assert_every_run_replays(temporal_client, handle)


async def test_interrupt_during_a_permission_ask(start_worker, temporal_client, scripted_server):
    """A pending permission ask is resolved (denied by `interrupt`), so nothing waits on it,
    and the tool is not run."""
    script = {
        "replies": [
            {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
            {"text": "never asked for"},
        ]
    }
    policy = {"mode": "auto", "rules": [{"tool": "weather", "decision": "ask"}]}
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, script), permissions=policy)
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "weather?"}]
    )
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    action_id = state.pending_actions[0]["actionId"]
    assert (await _interrupt(handle, reason="not now"))["status"] == "accepted"
    state = await wait_until(handle, idle_after(1))
    assert state.pending_actions == [] and state.stop_reason == "interrupted"
    resolved = stored_events(worker, handle.id, "action.resolved")
    assert [(e.action_id, e.payload["decision"], e.payload["decidedBy"]) for e in resolved] == [
        (action_id, "deny", "interrupt")
    ]
    permission = stored_events(worker, handle.id, "permission.resolved")
    assert [e.payload["decidedBy"] for e in permission] == ["interrupt"]
    tools = [m for m in worker.store.messages.list(handle.id) if m.role == "tool"]
    assert len(tools) == 1 and "not run: the turn was interrupted" in (tools[0].content or "")
    assert _interrupted_turn(worker, handle.id)["reason"] == "not now"
    _assert_valid(worker, handle.id)
    await handle.signal("terminate", {})
    await asyncio.wait_for(handle.result(), timeout=60)
    await assert_every_run_replays(temporal_client, handle)


async def test_interrupt_keeps_queued_messages(start_worker, temporal_client, scripted_server):
    """A message queued behind the interrupted turn stays queued and starts its own turn
    as soon as the interrupted one has ended."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "slow please"}]
    )
    await until(lambda: stored_events(worker, handle.id, "model.delta"), "the reply streams")
    queued = await handle.execute_update("submit_turn", {"role": "user", "content": "next"})
    assert queued["status"] == "queued"
    assert (await _interrupt(handle))["status"] == "accepted"
    state = await wait_until(handle, idle_after(2))
    assert state.last_outcome == "quick answer"
    started = [e.turn_id for e in stored_events(worker, handle.id, "turn.started")]
    assert started[1] == queued["turnId"]
    submitted = stored_events(worker, handle.id, "turn.submitted")
    assert [(e.turn_id, e.queue_id, e.payload["status"], e.payload["source"]) for e in submitted][
        -1
    ] == (queued["turnId"], queued["queueId"], "queued", "submit_turn")
    _assert_valid(worker, handle.id)
    await handle.signal("terminate", {})


async def test_interrupt_noops_and_refusals(start_worker, temporal_client, scripted_server):
    """Nothing running, or another turn named, is a no-op saying so (a warning for the
    signal); a malformed payload is refused naming the field, or warned as a signal."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    idle = await _interrupt(handle, reason="just in case")
    assert idle == {"status": "noop", "turnId": None, "reason": "no turn is running"}
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await _interrupt(handle, reason=7)
    assert "reason" in str(refused.value.cause)
    with pytest.raises(WorkflowUpdateFailedError) as wrong:
        await _interrupt(handle, sessionId="someone-elses")
    assert "interrupt_turn.sessionId 'someone-elses'" in str(wrong.value.cause)
    await handle.signal("interrupt_turn", {"turnId": ""})
    await handle.signal("interrupt_turn", {})
    await handle.signal("queue_message", {"role": "user", "content": "slow please"})
    await until(lambda: stored_events(worker, handle.id, "model.delta"), "the reply streams")
    other = await _interrupt(handle, turnId="turn_elsewhere")
    assert other["status"] == "noop" and other["turnId"] == "turn_elsewhere"
    assert other["reason"].startswith("turn turn_elsewhere is not running (the running turn is ")
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    warnings = stored_events(worker, handle.id, "runtime.warning")
    assert [(e.payload["code"], e.payload["signal"]) for e in warnings] == [
        ("malformed_signal", "interrupt_turn"),
        ("interrupt_noop", "interrupt_turn"),
    ]
    _assert_valid(worker, handle.id)
    await handle.signal("terminate", {})


async def test_session_and_submission_events(start_worker, temporal_client, scripted_server):
    """A root thread records `session.created` once and `session.updated` when its status
    changes (not per step); each accepted message records `turn.submitted`."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SLOW_THEN_QUICK)))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    accepted = await handle.execute_update("submit_turn", {"role": "user", "content": "hi"})
    await wait_until(handle, idle_after(1))
    assert len(stored_events(worker, handle.id, "session.created")) == 1
    updated = [e.payload["status"] for e in stored_events(worker, handle.id, "session.updated")]
    assert updated == ["idle", "running", "idle"]
    submitted = stored_events(worker, handle.id, "turn.submitted")
    assert [(e.turn_id, e.queue_id, e.payload) for e in submitted] == [
        (
            accepted["turnId"],
            accepted["queueId"],
            {"status": "accepted", "policy": "enqueue", "source": "submit_turn", "role": "user"},
        )
    ]
    await handle.signal("terminate", {})
    await asyncio.wait_for(handle.result(), timeout=60)
    updated = [e.payload["status"] for e in stored_events(worker, handle.id, "session.updated")]
    assert updated[-1] == "cancelled"
    _assert_valid(worker, handle.id)


async def test_interrupt_inside_a_prompt_tool(start_worker, temporal_client, scripted_server):
    """A prompt tool's own model call is cancelled too: the prompt tool's result is an
    `aborted` error saying the turn was interrupted, and the turn ends `interrupted`."""
    ask = {"tool_calls": [{"name": "advisor", "arguments": {"message": "Check Paris"}}]}
    main = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "advise", "replies": [ask]},
                {"match": "*", "replies": [{"text": "back again"}]},
            ]
        },
    )
    advisor = add_script(scripted_server, {"replies": [{"text": "Let me think " * 30, **SLOW}]})
    worker = await start_worker(prompt_tool_definitions(main, advisor))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "advise me"}]
    )
    await until(
        lambda: [
            e for e in stored_events(worker, handle.id, "model.delta") if e.payload.get("depth")
        ],
        "the advisor's reply streams",
    )
    assert (await _interrupt(handle, reason="enough advice"))["status"] == "accepted"
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "interrupted"
    failed = stored_events(worker, handle.id, "tool.failed")
    assert [(e.payload["name"], e.payload["errorCode"]) for e in failed] == [("advisor", "aborted")]
    assert "not finished: the turn was interrupted" in failed[0].payload["message"]
    assert _interrupted_turn(worker, handle.id)["reason"] == "enough advice"
    await handle.signal("queue_message", {"role": "user", "content": "hello"})
    assert (await wait_until(handle, idle_after(2))).last_outcome == "back again"
    _assert_valid(worker, handle.id)
    await handle.signal("terminate", {})
