"""Stop conditions in spec order: session tools, dual_ai turns, queued tools, the messages query."""

from __future__ import annotations

import json

from support import add_script, agent_definitions, idle_after, read, start_thread, wait_until

from weft.definitions import Definitions, define_agent, define_model, define_prompt


async def test_session_fail_wins_over_session_stop(start_worker, temporal_client, scripted_server):
    """sessionFail is checked before sessionStop; its message property becomes the outcome."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "done", "arguments": {"summary": "ok"}},
                        {"name": "give_up", "arguments": {"why": "no data", "files": ["/a.txt"]}},
                    ]
                },
            ]
        },
    )
    worker = await start_worker(
        agent_definitions(
            script,
            side={
                "sessionStop": {"name": "done", "messageProperty": "summary"},
                "sessionFail": {
                    "name": "give_up",
                    "messageProperty": "why",
                    "attachmentsProperty": "files",
                },
            },
        )
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "try"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "session_fail" and state.last_outcome == "no data"
    final = worker.store.messages.list(handle.id)[-1]
    assert final.role == "assistant" and final.content == "no data"
    assert final.attachments == ["/a.txt"] and final.metadata["status_kind"] == "session_fail"


async def test_session_stop_only_counts_when_it_succeeded(
    start_worker, temporal_client, scripted_server
):
    """A sessionStop call with invalid arguments is an error result and does not stop."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": 5}}]},
                {"tool_calls": [{"name": "done", "arguments": {"summary": "finished"}}]},
            ]
        },
    )
    worker = await start_worker(
        agent_definitions(
            script,
            side={
                "sessionStop": {"name": "done", "messageProperty": "summary"},
                "stopOnResponse": False,
            },
        )
    )
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "session_stop" and state.counters.steps == 2


def _debate(script_a: str, script_b: str, turns: int) -> Definitions:
    return Definitions().add(
        define_model(name="ma", provider="scripted", model=script_a),
        define_model(name="mb", provider="scripted", model=script_b),
        define_prompt(name="pro", toolDescription="argues for", model="ma", prompt="Argue for."),
        define_prompt(
            name="con", toolDescription="argues against", model="mb", prompt="Argue against."
        ),
        define_agent(
            name="debate",
            type="dual_ai",
            sideA={"prompt": "pro"},
            sideB={"prompt": "con"},
            maxSessionTurns=turns,
        ),
    )


async def test_dual_ai_max_session_turns_and_projection(
    start_worker, temporal_client, scripted_server
):
    """A dual_ai session stops after maxSessionTurns exchanges; each side sees the other as user."""
    side_a = add_script(scripted_server, {"replies": [{"text": "A says yes"}]})
    side_b = add_script(scripted_server, {"replies": [{"text": "B says no"}]})
    worker = await start_worker(_debate(side_a, side_b, 2))
    scripted_server.clear_requests()
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="debate",
        messages=[{"role": "user", "content": "Is tea better?"}],
    )
    state = await wait_until(
        handle, lambda s: s.status == "waiting_input" and not s.queue and s.stop_reason is not None
    )
    assert state.stop_reason == "max_session_turns"
    assert state.counters.side_a_turns == 2 and state.counters.side_b_turns == 2
    texts = [
        (m.side, m.content) for m in worker.store.messages.list(handle.id) if m.role == "assistant"
    ]
    assert texts == [("a", "A says yes"), ("b", "B says no")] * 2
    seen_by_b = [r for r in scripted_server.requests if r["model"] == side_b][-1]["messages"]
    roles = [(m["role"], m.get("content")) for m in seen_by_b]
    assert roles[0][0] == "system" and "Argue against." in roles[0][1]
    assert ("user", "A says yes") in roles and ("assistant", "B says no") in roles


async def test_queue_tool_runs_through_tool_flow(start_worker, temporal_client, scripted_server):
    """queue_tool stores a call and its result, then the model reacts to it."""
    # No user message yet: the model's reply index counts the stored tool call's message.
    script = add_script(
        scripted_server, {"replies": [{"text": "unused"}, {"text": "I see the weather."}]}
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, lambda s: s.status == "waiting_input")
    await handle.signal("queue_tool", {"name": "weather", "args": {"city": "Kyiv"}})
    await wait_until(handle, idle_after(1))
    messages = worker.store.messages.list(handle.id)
    assert [m.role for m in messages] == ["assistant", "tool", "assistant"]
    assert messages[0].metadata == {"queued_tool": True}
    assert json.loads(messages[1].content)["result"]["city"] == "Kyiv"
    page = await handle.query("messages", {"cursor": 0, "limit": 2})
    assert [m["role"] for m in page["messages"]] == ["assistant", "tool"]
    assert page["nextCursor"] == 2
    rest = await handle.query("messages", {"cursor": page["nextCursor"]})
    assert [m["role"] for m in rest["messages"]] == ["assistant"] and rest["nextCursor"] is None
    assert (await read(handle)).counters.messages == 3


async def test_unknown_agent_fails_the_thread_clearly(
    start_worker, temporal_client, scripted_server
):
    """Starting a thread of an agent the worker does not define fails it with the cause."""
    import pytest
    from temporalio.client import WorkflowFailureError

    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "x"}]}))
    )
    handle = await start_thread(temporal_client, worker.task_queue, agent="nobody")
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert "unknown agent; known agents: helper" in str(caught.value.cause)
    assert (await read(handle)).status == "failed"


async def test_invalid_start_input_fails_the_thread_clearly(
    start_worker, temporal_client, scripted_server
):
    """A start input with a wrong field type fails the workflow naming the field."""
    import pytest
    from temporalio.client import WorkflowFailureError

    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "x"}]}))
    )
    handle = await temporal_client.start_workflow(
        "AgentThread",
        {"agent": "helper", "messages": "hello"},
        id="bad-start-" + worker.task_queue,
        task_queue=worker.task_queue,
    )
    with pytest.raises(WorkflowFailureError) as caught:
        await handle.result()
    assert "field 'messages'" in str(caught.value.cause)
