"""The step cycle end to end: model, tools, persistence and stop rules on a real dev server."""

from __future__ import annotations

import json

from support import add_script, agent_definitions, idle_after, read, start_thread, wait_until

from weft.store import Store


async def test_tool_call_then_answer(start_worker, temporal_client, scripted_server):
    """A model step that calls a tool, then a step that answers, ends on stop_on_response."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"text": "It is sunny in Paris."},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "Weather in Paris?"}],
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    assert state.counters.steps == 2
    assert state.usage.input_tokens > 0 and state.usage.cost_usd is not None
    messages = worker.store.messages.list(handle.id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    tool_result = json.loads(messages[2].content)
    assert tool_result == {
        "status": "success",
        "result": {"city": "Paris", "forecast": "sunny", "celsius": 21},
    }
    assert messages[3].content == "It is sunny in Paris."


async def test_tool_errors_become_results(start_worker, temporal_client, scripted_server):
    """An unknown tool, bad arguments and a raising tool each become error results."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "nope", "arguments": {}},
                        {"name": "weather", "arguments": {"town": 3}},
                        {"name": "explode", "arguments": {"text": "boom"}},
                    ]
                },
                {"text": "Sorry."},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1))
    tools = [m for m in worker.store.messages.list(handle.id) if m.role == "tool"]
    results = [json.loads(m.content) for m in tools]
    assert [r["error_code"] for r in results] == [
        "unknown_tool",
        "invalid_arguments",
        "tool_exception",
    ]
    assert "field 'city'" in results[1]["error"]
    assert "tool exploded on 'boom'" in results[2]["error"]
    assert all(m.tool_status == "error" for m in tools)


async def test_queued_message_while_busy_is_injected(
    start_worker, temporal_client, scripted_server
):
    """A message queued during a step is injected before the next model call (FIFO)."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "first",
                    "replies": [
                        {
                            "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}],
                            "delay_ms": 400,
                        },
                        {"text": "done"},
                    ],
                },
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "first"}]
    )
    await wait_until(handle, lambda s: s.status == "running")
    await handle.signal("queue_message", {"role": "user", "content": "first, again"})
    await wait_until(handle, idle_after(1))
    roles = [(m.role, m.content) for m in worker.store.messages.list(handle.id)]
    assert roles[0] == ("user", "first")
    assert ("user", "first, again") in roles
    # Injected before the second model call: it follows the tool result.
    assert roles.index(("user", "first, again")) == 3


async def test_stop_tool_response_property(start_worker, temporal_client, scripted_server):
    """stopTool ends the turn and its response property becomes the response text."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "finish", "arguments": {"answer": "42"}}]},
            ]
        },
    )
    worker = await start_worker(
        agent_definitions(script, side={"stopTool": "finish", "stopToolResponseProperty": "answer"})
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "answer?"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_tool" and state.last_outcome == "42"


async def test_max_steps_and_hard_cap(start_worker, temporal_client, scripted_server):
    """maxSteps ends a turn that keeps calling tools, with reason max_side_steps."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}], "repeat": 10},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script, side={"maxSteps": 3}))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "loop"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "max_side_steps" and state.counters.steps == 3
    capped = await start_thread(
        temporal_client,
        worker.task_queue,
        options={"maxTotalSteps": 2},
        messages=[{"role": "user", "content": "loop"}],
    )
    state = await wait_until(
        capped, lambda s: s.status == "waiting_input" and s.stop_reason is not None
    )
    assert state.stop_reason == "max_total_steps" and state.counters.steps == 2


async def test_store_holds_thread_row(start_worker, temporal_client, scripted_server):
    """The thread row is in the store with its agent and idle status after a turn."""
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    await wait_until(handle, idle_after(1))
    store: Store = worker.store
    row = store.threads.get(handle.id)
    assert row is not None and row.agent == "helper" and row.status == "waiting_input"
    assert (await read(handle)).last_outcome == "hi"
