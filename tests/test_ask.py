"""`Threads.ask` (submit_turn with wait=completed) on a live thread: answers, tool turns,
queued and joined turns, failures, terminate, re-attaching by update id, continue-as-new
and `weft thread ask`."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import (
    StartWorker,
    add_script,
    agent_definitions,
    idle_after,
    read,
    sequence_of,
    start_thread,
    store_of,
    wait_until,
)
from temporalio.client import Client, WorkflowHandle
from worker_process import crash_drill, until_event, worker_config

from weft.client.ask import TurnWaitTimeout
from weft.client.threads import Threads, tail_events
from weft.contract.thread import SIGNAL_TERMINATE, UPDATE_SUBMIT_TURN
from weft.contract.turns import TurnResult
from weft.store import Store
from weft.workers.agent_worker import AgentWorker
from weft.workers.scripted_model import ScriptedModelServer


async def _thread(
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    script: dict[str, Any],
    **kw: Any,
) -> tuple[AgentWorker, WorkflowHandle[Any, Any], Threads]:
    worker = await start_worker(agent_definitions(add_script(scripted_server, script)))
    handle = await start_thread(temporal_client, worker.task_queue, **kw)
    return (
        worker,
        handle,
        Threads(temporal_client, task_queue=worker.task_queue, store=worker.store),
    )


async def _until_stored(store: Store, thread_id: str, event_type: str, count: int = 1) -> None:
    for _ in range(600):
        if len(store.events.read(thread_id, types=[event_type])) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {event_type} event for {thread_id}")


SLOW = {"chunk_size": 4, "chunk_delay_ms": 150}


async def _continued_after_turn(store: Store, thread_id: str) -> tuple[int, int, list[int]]:
    """Sequences of the first turn's start and end, and of every continue-as-new, once one
    came after that turn ended."""
    for _ in range(600):
        events = store.events.read(thread_id, limit=10_000)
        started = [sequence_of(e) for e in events if e.type == "turn.started"]
        ended = [sequence_of(e) for e in events if e.type == "turn.completed"]
        continued = [
            sequence_of(e)
            for e in events
            if e.type == "thread.updated" and "continuedAsNew" in (e.payload or {})
        ]
        if ended and any(c > ended[0] for c in continued):
            return started[0], ended[0], continued
        await asyncio.sleep(0.05)
    raise AssertionError(f"{thread_id} did not continue as new after its first turn")


async def test_ask_returns_the_answer(start_worker, temporal_client, scripted_server):
    """ask returns the final assistant text, its stored message, the turn's usage and a
    cursor from which the thread's events resume."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {"replies": [{"text": "Forty-two.", "usage": {"input_tokens": 30, "output_tokens": 5}}]},
    )
    result = await threads.ask(handle.id, "What is the answer?")
    assert result.status == "completed" and result.stop_reason == "stop_on_response"
    assert result.response == "Forty-two." and result.error is None
    assert result.message_id is not None and result.events_cursor is not None
    stored = store_of(worker).messages.get(handle.id, result.message_id)
    assert stored is not None and stored.role == "assistant" and stored.content == "Forty-two."
    assert stored.turn_id == result.turn_id
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (30, 5)
    assert result.usage.cost_usd == pytest.approx((30 * 1.0 + 5 * 2.0) / 1_000_000)
    ended = store_of(worker).events.read(handle.id, types=["turn.completed"])
    after: list[str] = []
    async for event in tail_events(store_of(worker), handle.id, after=result.events_cursor):
        after.append(event.type)
        if event.type == "snapshot.updated":
            break
    assert ended[0].event_id == result.events_cursor and ended[0].turn_id == result.turn_id
    assert "turn.completed" not in after and "thread.updated" in after
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_ask_through_a_tool_call(start_worker, temporal_client, scripted_server):
    """A turn that calls a tool answers with the text after the tool result."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "Sunny in Oslo, 21 degrees."},
            ]
        },
    )
    result = await threads.ask(handle.id, "Weather in Oslo?")
    assert result.status == "completed" and result.response == "Sunny in Oslo, 21 degrees."
    roles = [(m.role, m.turn_id) for m in store_of(worker).messages.list(handle.id)]
    assert roles == [(r, result.turn_id) for r in ("user", "assistant", "tool", "assistant")]
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_ask_queued_behind_a_running_turn(start_worker, temporal_client, scripted_server):
    """Asked while another turn's last model call streams, the message gets a turn of its
    own, and ask returns that turn's answer, not the running one's."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {
            "turns": [
                {"match": "first", "replies": [{"text": "the first answer, slowly", **SLOW}]},
                {"match": "second", "replies": [{"text": "the second answer"}]},
            ]
        },
        messages=[{"role": "user", "content": "first"}],
    )
    await _until_stored(store_of(worker), handle.id, "model.delta")
    running = (await read(handle)).active_turn_id
    result = await threads.ask(handle.id, "second")
    assert result.status == "completed" and result.response == "the second answer"
    assert running is not None and result.turn_id != running
    assert (await read(handle)).counters.turns == 2
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_ask_joins_a_turn_between_its_steps(start_worker, temporal_client, scripted_server):
    """A message asked while a turn calls a tool is read by that turn's next step; ask
    returns that turn's answer, under that turn's id."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {
            "turns": [
                {
                    "match": "first",
                    "replies": [
                        {
                            "text": "let me look that up for you, one moment while I check",
                            "tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}],
                            **SLOW,
                        }
                    ],
                },
                {"match": "and also", "replies": [{"text": "both answered"}]},
            ]
        },
        messages=[{"role": "user", "content": "first"}],
    )
    await _until_stored(store_of(worker), handle.id, "model.delta")
    running = (await read(handle)).active_turn_id
    result = await threads.ask(handle.id, "and also this")
    assert result.turn_id == running and result.response == "both answered"
    state = await read(handle)
    assert state.counters.turns == 1 and state.status == "waiting_input"
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_ask_a_failing_turn(start_worker, temporal_client, scripted_server):
    """When every model fails the turn ends with step_error: ask returns failed, and why."""
    _, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {"replies": [{"error": {"status": 401, "body": "no key for you"}}]},
    )
    result = await threads.ask(handle.id, "hello?")
    assert result.status == "failed" and result.stop_reason == "step_error"
    assert result.response is None and result.error is not None and "401" in result.error
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_terminate_while_asking(start_worker, temporal_client, scripted_server):
    """Terminate ends the running turn and the queued one: both asks return aborted, with
    the terminate reason, and a later ask is refused by the thread."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {"replies": [{"text": "a long answer that will never finish streaming", **SLOW}]},
    )
    running = asyncio.create_task(threads.ask(handle.id, "go"))
    await _until_stored(store_of(worker), handle.id, "model.delta")
    queued = asyncio.create_task(threads.ask(handle.id, "and then"))
    await wait_until(handle, lambda s: len(s.queue) == 1)
    await threads.terminate(handle.id, "enough")
    first, second = await running, await queued
    assert (first.status, first.stop_reason) == ("aborted", "aborted_by_user")
    assert first.error == "the thread was terminated: enough"
    assert second.status == "aborted" and second.turn_id != first.turn_id
    assert second.error == "the thread was terminated before a turn read the message: enough"


async def test_reject_policy_on_a_busy_thread(start_worker, temporal_client, scripted_server):
    """policy=reject on a busy thread returns a refused turn at once, saying why."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {"replies": [{"text": "busy busy busy busy busy busy busy", **SLOW}]},
        messages=[{"role": "user", "content": "work"}],
    )
    await _until_stored(store_of(worker), handle.id, "model.delta")
    result = await threads.ask(handle.id, "now!", policy="reject")
    assert result.status == "refused" and result.error is not None and "busy" in result.error
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_reattach_by_update_id(start_worker, temporal_client, scripted_server):
    """An ask cut by its timeout goes on in the thread; asking again with its update id,
    from another client object, waits for the same turn and queues nothing twice."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {"replies": [{"text": "an answer worth waiting for, streamed slowly", **SLOW}]},
    )
    with pytest.raises(TurnWaitTimeout) as cut:
        await threads.ask(handle.id, "take your time", timeout=0.5)
    other = Threads(temporal_client, task_queue=worker.task_queue)
    first = await other.ask(handle.id, "take your time", update_id=cut.value.update_id)
    again = await threads.ask(handle.id, "take your time", update_id=cut.value.update_id)
    assert first.response == "an answer worth waiting for, streamed slowly"
    assert again == first
    users = [m for m in store_of(worker).messages.list(handle.id) if m.role == "user"]
    assert [m.content for m in users] == ["take your time"]
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_continue_as_new_waits_for_the_asker(start_worker, temporal_client, scripted_server):
    """A long turn someone waits for does not continue as new midway; the thread continues
    once the answer is given, and an ask re-sent to the new run with the same update id
    returns the carried result (text from the store) without queuing it again."""
    worker, handle, threads = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {
            "turns": [
                {
                    "match": "notes",
                    "replies": [
                        {"tool_calls": [{"name": "note", "arguments": {"text": "n"}}], "repeat": 8},
                        {"text": "eight notes taken"},
                    ],
                },
                {"match": "*", "replies": [{"text": "hi"}]},
            ]
        },
        options={"continueAsNewEvents": 20},
    )
    result = await threads.ask(handle.id, "take notes", update_id="ask-notes")
    assert result.response == "eight notes taken"
    assert len(store_of(worker).values.get(handle.id, "notes") or []) == 8
    # The turn ran in one run (its 8 steps would have continued as new several times);
    # the run continued as new once the answer was given.
    started, ended, continued = await _continued_after_turn(store_of(worker), handle.id)
    assert not [c for c in continued if started < c < ended], (started, ended, continued)
    again = await threads.ask(handle.id, "take notes", update_id="ask-notes")
    assert again == result
    # The new run got the update again, and answered it from what it carried.
    latest = await temporal_client.get_workflow_handle(handle.id).fetch_history()
    accepted = [
        e.workflow_execution_update_accepted_event_attributes.accepted_request.meta.update_id
        for e in latest.events
        if e.HasField("workflow_execution_update_accepted_event_attributes")
    ]
    assert accepted == ["ask-notes"]
    users = [m for m in store_of(worker).messages.list(handle.id) if m.role == "user"]
    assert [m.content for m in users] == ["take notes"]
    hi = await threads.ask(handle.id, "hello")
    assert hi.response == "hi"
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_plain_submit_turn_still_returns_at_once(
    start_worker, temporal_client, scripted_server
):
    """Without wait, submit_turn answers on acceptance and carries no turn result."""
    _, handle, threads = await _thread(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "ok"}]}
    )
    await wait_until(handle, idle_after(0))
    accepted = await handle.execute_update(
        UPDATE_SUBMIT_TURN, {"role": "user", "content": "hi"}, result_type=dict
    )
    assert accepted["status"] == "accepted" and accepted["turn"] is None
    await wait_until(handle, idle_after(1))
    await handle.signal(SIGNAL_TERMINATE, {})


async def test_weft_thread_ask_prints_the_answer(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`weft thread ask` prints the answer and exits 0; a failed turn exits 1 naming it."""
    worker, handle, _ = await _thread(
        start_worker,
        temporal_client,
        scripted_server,
        {
            "turns": [
                {"match": "break", "replies": [{"error": {"status": 401, "body": "no key"}}]},
                {"match": "*", "replies": [{"text": "Paris is the capital."}]},
            ]
        },
    )
    config = tmp_path / "cli.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": weft_config.temporal.address, "taskQueue": "unused"},
                "store": {"url": weft_config.store_url()},
            }
        )
    )
    code, out, err = await _weft(config, "thread", "ask", handle.id, "Capital of France?")
    assert (code, out) == (0, "Paris is the capital.\n"), err
    code, out, err = await _weft(config, "thread", "ask", handle.id, "break", "--json")
    failed = TurnResult.model_validate_json(out)
    assert code == 1 and failed.status == "failed" and "step_error" in err
    await handle.signal(SIGNAL_TERMINATE, {})


async def _weft(config: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_ask_survives_a_worker_kill(tmp_path, dev_server, temporal_client):
    """A worker SIGKILLed in the middle of the asked turn: a fresh worker finishes the turn
    and the same ask call returns its answer."""
    config_file = worker_config(tmp_path, dev_server.address)
    async with crash_drill(config_file) as (task_queue, first, second, store):
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="crash_agent",
            options={"heartbeatTimeoutSeconds": 2},
        )
        threads = Threads(temporal_client, task_queue=task_queue, store=store)
        asking = asyncio.create_task(threads.ask(handle.id, "slow model please"))
        await until_event(store, handle.id, "model.delta")
        await first.kill()
        await second.start()
        result = await asyncio.wait_for(asking, 90)
        assert result.status == "completed"
        assert result.response is not None
        assert result.response.startswith("This reply streams slowly")
        assert [m.role for m in store.messages.list(handle.id)] == ["user", "assistant"]
        requested = store.events.read(handle.id, types=["model.requested"])
        assert any(e.payload["reset"] for e in requested), "the kill did not hit the model call"
        await handle.signal(SIGNAL_TERMINATE, {})
