"""The control plane through the real `temporal` CLI: bad payloads, updates, terminate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import (
    add_script,
    agent_definitions,
    idle_after,
    read,
    start_thread,
    temporal_cli,
    wait_until,
)
from temporalio.client import WorkflowExecutionStatus

from weft.contract.thread import ThreadResult

MALFORMED_SIGNALS = [
    ("queue_message", '{"role": 5, "content": "x"}', "field 'role'"),
    ("queue_message", '{"content": "no role"}', "field 'role'"),
    ("queue_message", '{"role": "robot", "content": "x"}', "field 'role'"),
    ("queue_message", '{"role": "user"}', "field 'content'"),
    ("queue_message", '{"role": "user", "content": 123}', "field 'content'"),
    ("queue_message", '"just a string"', "got a string"),
    ("queue_message", "[1, 2, 3]", "got an array"),
    ("queue_message", "null", "got null"),
    ("queue_message", '{"role": "user", "content": "x", "bogus": 1}', "field 'bogus'"),
    (
        "queue_message",
        '{"role": "user", "content": "x", "attachments": "a.png"}',
        "field 'attachments'",
    ),
    ("queue_tool", '{"name": ""}', "field 'name'"),
    ("queue_tool", '{"name": "weather", "args": "Paris"}', "field 'args'"),
    ("no_such_signal", '{"role": "user", "content": "x"}', "no signal named"),
]


async def _signal(address: str, thread_id: str, name: str, *extra: str) -> tuple[int, str, str]:
    return await temporal_cli(
        address, "workflow", "signal", "--workflow-id", thread_id, "--name", name, *extra
    )


async def test_malformed_signals_never_break_a_thread(
    start_worker, temporal_client, scripted_server, dev_server, tmp_path
):
    """Each malformed signal becomes a runtime.warning; the thread still answers after."""
    script = add_script(scripted_server, {"replies": [{"text": "still here"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    for name, payload, _ in MALFORMED_SIGNALS:
        code, _, err = await _signal(dev_server.address, handle.id, name, "--input", payload)
        assert code == 0, err
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({"role": "user", "content": "x" * 300_000}))
    await _signal(dev_server.address, handle.id, "queue_message", "--input-file", str(huge))
    await _signal(dev_server.address, handle.id, "queue_message")  # no payload at all
    expected = len(MALFORMED_SIGNALS) + 2
    await wait_until(handle, lambda s: s.warnings == expected)
    await handle.signal("queue_message", {"role": "user", "content": "are you ok?"})
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "still here" and not state.queue
    await handle.signal("terminate", {})
    await handle.result()  # flushes the outbox
    warnings = [e.payload for e in worker.store.events.read(handle.id, types=["runtime.warning"])]
    assert len(warnings) == expected
    for (_, _, fragment), warning in zip(MALFORMED_SIGNALS, warnings, strict=False):
        assert fragment in warning["message"], warning
    assert "at most 262144 characters" in warnings[-2]["message"]
    assert "exactly one JSON object argument, got 0" in warnings[-1]["message"]


async def _submit_turn(address: str, thread_id: str, payload: str) -> tuple[int, str, str]:
    return await temporal_cli(
        address,
        "workflow",
        "update",
        "execute",
        "--workflow-id",
        thread_id,
        "--name",
        "submit_turn",
        "--input",
        payload,
        "-o",
        "json",
    )


async def test_submit_turn_update_via_cli(
    start_worker, temporal_client, scripted_server, dev_server
):
    """submit_turn accepts a turn on an idle thread and rejects malformed input by name."""
    script = add_script(scripted_server, {"replies": [{"text": "hello back"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    code, out, err = await _submit_turn(
        dev_server.address, handle.id, '{"role": "user", "content": "hi"}'
    )
    assert code == 0, err
    assert json.loads(out)["result"]["status"] == "accepted", out
    await wait_until(handle, idle_after(1))
    for payload, fragment in [
        ('{"role": "user"}', "field 'content'"),
        ('"hi"', "got a string"),
        ('{"role": "bot", "content": "x"}', "field 'role'"),
    ]:
        code, out, err = await _submit_turn(dev_server.address, handle.id, payload)
        assert code != 0 and fragment in (out + err), (payload, out, err)
    assert (await read(handle)).counters.turns == 1


async def test_terminate_cancels_in_flight_and_closes(
    start_worker, temporal_client, scripted_server, dev_server
):
    """terminate cancels the running model call, refuses new turns and closes the workflow."""
    script = add_script(scripted_server, {"replies": [{"text": "too late", "delay_ms": 20_000}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        options={"heartbeatTimeoutSeconds": 5},
        messages=[{"role": "user", "content": "slow please"}],
    )
    await wait_until(handle, lambda s: s.status == "running")
    code, _, err = await _signal(
        dev_server.address, handle.id, "terminate", "--input", '{"reason": "user left"}'
    )
    assert code == 0, err
    result = ThreadResult.model_validate(await handle.result())
    assert result.status == "cancelled" and result.reason == "user left"
    assert result.terminated_at is not None and result.stop_reason == "aborted_by_user"
    description = await handle.describe()
    assert description.status == WorkflowExecutionStatus.COMPLETED
    history = await handle.fetch_history()
    cancelled = [
        e for e in history.events if e.HasField("activity_task_cancel_requested_event_attributes")
    ]
    assert cancelled, "the in-flight model activity was not cancelled"
    messages = worker.store.messages.list(handle.id)
    assert [m.role for m in messages] == ["user"]
    row = worker.store.threads.get(handle.id)
    assert row is not None and row.status == "cancelled"


async def test_submit_turn_rejected_after_terminate(start_worker, temporal_client, scripted_server):
    """Between terminate and close, submit_turn is rejected and signals become warnings."""
    script = add_script(scripted_server, {"replies": [{"text": "x", "delay_ms": 20_000}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "wait"}]
    )
    await wait_until(handle, lambda s: s.status == "running")
    await handle.signal("terminate", {"reason": "stop"})
    await handle.signal("queue_message", {"role": "user", "content": "late"})
    result = ThreadResult.model_validate(await handle.result())
    assert result.status == "cancelled"
    # The late signal was refused and counted; see the closing note of session 1 for why
    # its warning event can miss the store when it races the final flush.
    state = await handle.query("thread_read")
    assert state["warnings"] == 1 and state["queue"] == []
    assert [m.content for m in worker.store.messages.list(handle.id)] == ["wait"]
    with pytest.raises(Exception, match="(terminated|completed)"):
        await handle.execute_update("submit_turn", {"role": "user", "content": "again"})


async def test_threads_listed_by_search_attributes(
    start_worker, temporal_client, scripted_server, dev_server
):
    """`temporal workflow list --query` finds threads by agent and status."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    agent = f"lister_{Path(script).name.replace('-', '_')}"
    worker = await start_worker(agent_definitions(script, agent=agent))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent=agent,
        messages=[{"role": "user", "content": "hi"}],
    )
    await wait_until(handle, idle_after(1))
    query = f"WeftAgent = '{agent}' AND WeftStatus = 'waiting_input'"
    for _ in range(100):  # visibility is eventually consistent
        code, out, err = await temporal_cli(
            dev_server.address, "workflow", "list", "--query", query, "-o", "json"
        )
        assert code == 0, err
        if handle.id in out:
            break
        import asyncio

        await asyncio.sleep(0.1)
    assert handle.id in out
