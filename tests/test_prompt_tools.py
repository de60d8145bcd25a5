"""Prompt tools (Runtime §5.3) end to end: a prompt's own model loop inside the thread.

The scripted model server records every request, so the tests assert what each prompt's
model was sent; the store holds every message with its `parent_id` and `depth`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from prompt_tool_support import prompt_tool_definitions
from support import (
    StartWorker,
    add_script,
    content_of,
    event_schema_validator,
    idle_after,
    start_thread,
    store_of,
    tool_calls_of,
    wait_until,
)
from temporalio.client import Client, WorkflowHandle

from weft.contract.messages import Message
from weft.contract.thread import ThreadRead
from weft.definitions import Definitions
from weft.workers.agent_worker import AgentWorker
from weft.workers.scripted_model import ScriptedModelServer

ASK = {"tool_calls": [{"name": "advisor", "arguments": {"message": "Check Paris"}}]}


def _requests(scripted_server: ScriptedModelServer, script: str) -> list[dict[str, Any]]:
    return [r for r in scripted_server.requests if r["model"] == script]


def _said(request: dict[str, Any]) -> list[tuple[str, str]]:
    """A request's messages as (role, text or tool-call names), system prompt first."""
    said = []
    for message in request["messages"]:
        calls = message.get("tool_calls") or []
        text = message.get("content") or ""
        said.append((message["role"], ",".join(c["function"]["name"] for c in calls) or text))
    return said


def _tool_result(messages: list[Message], name: str) -> dict[str, Any]:
    [message] = [m for m in messages if m.role == "tool" and m.name == name]
    assert message.content is not None, f"the {name} result has no content"
    result: dict[str, Any] = json.loads(message.content)
    return result


async def _run(
    start_worker: StartWorker,
    temporal_client: Client,
    definitions: Definitions,
    text: str = "hello",
    **fields: Any,
) -> tuple[AgentWorker, WorkflowHandle[Any, Any], ThreadRead, list[Message]]:
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": text}], **fields
    )
    state = await wait_until(handle, idle_after(1), timeout=60)
    return worker, handle, state, store_of(worker).messages.list(handle.id)


async def test_prompt_tool_runs_its_own_loop(start_worker, temporal_client, scripted_server):
    """The prompt runs its own model and tools, stores its messages at depth 1 under the
    call, never shows them to the caller's model, and answers with one shaped result."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "The advisor says sunny."}]})
    advisor = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
                {"text": "Paris is sunny."},
            ]
        },
    )
    worker, handle, state, messages = await _run(
        start_worker, temporal_client, prompt_tool_definitions(main, advisor)
    )
    assert state.stop_reason == "stop_on_response"
    assert state.counters.steps == 4  # two steps of the caller, two of the prompt tool
    call_id = tool_calls_of(messages[1])[0].id
    assert [(m.role, m.depth, m.parent_id) for m in messages] == [
        ("user", 0, None),
        ("assistant", 0, None),
        ("user", 1, call_id),
        ("assistant", 1, call_id),
        ("tool", 1, call_id),
        ("assistant", 1, call_id),
        ("tool", 0, None),
        ("assistant", 0, None),
    ]
    assert messages[2].content == "Check Paris"
    assert _tool_result(messages, "advisor") == {
        "status": "success",
        "result": {
            "response": "Paris is sunny.",
            "toolCalls": [{"name": "weather", "arguments": {"city": "Paris"}, "status": "success"}],
        },
    }
    # The prompt's model got its own system prompt and tools, and only its own messages.
    first, second = _requests(scripted_server, advisor)
    assert first["messages"] == [
        {"role": "system", "content": "You are the advisor."},
        {"role": "user", "content": "Check Paris"},
    ]
    assert [t["function"]["name"] for t in first["tools"]] == ["weather", "explode", "ask_human"]
    assert _said(second)[-2:] == [
        ("assistant", "weather"),
        ("tool", '{"city":"Paris","forecast":"sunny","celsius":21}'),
    ]
    # The caller's model never saw the nested messages: call, then the one result, which
    # it reads as the result's JSON text, not the stored envelope (docs/tool-results.md).
    assert _said(_requests(scripted_server, main)[-1])[1:] == [
        ("user", "hello"),
        ("assistant", "advisor"),
        (
            "tool",
            '{"response":"Paris is sunny.","toolCalls":[{"name":"weather",'
            '"arguments":{"city":"Paris"},"status":"success"}]}',
        ),
    ]
    await handle.signal("terminate", {})


async def test_nested_events_carry_the_parent_call(start_worker, temporal_client, scripted_server):
    """Every event written inside the prompt tool names the call and depth; all validate."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "ok"}]})
    advisor = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "Cold."},
            ]
        },
    )
    worker, handle, _, messages = await _run(
        start_worker, temporal_client, prompt_tool_definitions(main, advisor)
    )
    call_id = tool_calls_of(messages[1])[0].id
    nested_steps = {
        m.metadata["stepId"] for m in messages if m.depth == 1 and m.role == "assistant"
    }
    events = store_of(worker).events.read(handle.id, limit=10_000)
    validator = event_schema_validator()
    for event in events:
        wire = event.to_wire()
        errors = list(validator.iter_errors(wire))
        assert not errors, f"{wire['type']} is invalid: {errors[0].message}"
    inside = [e for e in events if e.step_id in nested_steps]
    assert {e.type for e in inside} >= {
        "model.requested",
        "model.delta",
        "model.completed",
        "tool.started",
        "tool.result",
    }
    for event in inside:
        assert event.payload["parentToolCallId"] == call_id, event.type
        assert event.payload["depth"] == 1, event.type
    # The prompt tool's own call is a main-loop fact: it names no parent.
    own = [e for e in events if e.tool_call_id == call_id]
    # Its arguments may stream first (`tool.args`, written by the main model's call).
    assert {e.type for e in own} - {"tool.args"} == {"tool.started", "tool.result"}
    assert all("parentToolCallId" not in (e.payload or {}) for e in own)
    assert all("parentToolCallId" not in e.payload for e in own)
    await handle.signal("terminate", {})


CHAT = {
    "turns": [
        {
            "match": "first question",
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}]},
                {"text": "Rome is sunny."},
            ],
        },
        {"match": "ask the advisor", "replies": [ASK, {"text": "Done."}]},
    ]
}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, [("user", "Check Paris")]),
        (
            {"includeChat": True},
            [
                ("user", "first question"),
                ("assistant", "Rome is sunny."),
                ("user", "ask the advisor"),
                ("user", "Check Paris"),
            ],
        ),
        (
            {"includeChat": True, "includePastTools": True},
            [
                ("user", "first question"),
                ("assistant", "weather"),
                ("tool", "weather result"),
                ("assistant", "Rome is sunny."),
                ("user", "ask the advisor"),
                ("user", "Check Paris"),
            ],
        ),
    ],
    ids=["own_messages_only", "include_chat", "include_chat_and_past_tools"],
)
async def test_include_chat_and_past_tools(
    start_worker, temporal_client, scripted_server, fields, expected
):
    """includeChat shows the caller's conversation before the call; includePastTools keeps
    its tool calls with their results, and the unanswered call itself is left out."""
    main = add_script(scripted_server, CHAT)
    advisor = add_script(scripted_server, {"replies": [{"text": "Seen."}]})
    definitions = prompt_tool_definitions(main, advisor, advisor_fields=fields)
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "first question"}],
    )
    await wait_until(handle, idle_after(1))
    await handle.signal("queue_message", {"role": "user", "content": "ask the advisor"})
    await wait_until(handle, idle_after(2))
    [request] = _requests(scripted_server, advisor)
    said = _said(request)
    assert said[0] == ("system", "You are the advisor.")
    got = [("tool", "weather result") if role == "tool" else (role, x) for role, x in said[1:]]
    assert got == expected
    await handle.signal("terminate", {})


FAILING_TOOL = {
    "replies": [
        {"tool_calls": [{"name": "explode", "arguments": {"text": "boom"}}]},
        {"text": "It broke."},
    ]
}


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            {},
            {
                "response": "It broke.",
                "toolCalls": [
                    {
                        "name": "explode",
                        "arguments": {"text": "boom"},
                        "status": "error",
                        "error": "RuntimeError: tool exploded on 'boom'",
                    }
                ],
            },
        ),
        (
            {"includeErrors": False},
            {
                "response": "It broke.",
                "toolCalls": [
                    {"name": "explode", "arguments": {"text": "boom"}, "status": "error"}
                ],
            },
        ),
        ({"includeToolCalls": False}, {"response": "It broke."}),
        (
            {"includeTextResponse": False},
            {
                "toolCalls": [
                    {
                        "name": "explode",
                        "arguments": {"text": "boom"},
                        "status": "error",
                        "error": "RuntimeError: tool exploded on 'boom'",
                    }
                ]
            },
        ),
    ],
    ids=["all", "no_errors", "no_tool_calls", "no_text_response"],
)
async def test_include_flags_shape_the_result(
    start_worker, temporal_client, scripted_server, entry, expected
):
    """includeTextResponse, includeToolCalls and includeErrors each shape the one result."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "ok"}]})
    advisor = add_script(scripted_server, FAILING_TOOL)
    _, handle, _, messages = await _run(
        start_worker, temporal_client, prompt_tool_definitions(main, advisor, entry=entry)
    )
    assert _tool_result(messages, "advisor") == {"status": "success", "result": expected}
    await handle.signal("terminate", {})


@pytest.mark.parametrize("include_errors", [True, False])
async def test_failed_model_is_a_tool_error(
    start_worker, temporal_client, scripted_server, include_errors
):
    """When every model of the prompt fails, the caller gets an error result (with the
    failure's text only under includeErrors) and its own turn carries on."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "The advisor is down."}]})
    advisor = add_script(
        scripted_server, {"replies": [{"error": {"status": 400, "body": "advisor model broke"}}]}
    )
    definitions = prompt_tool_definitions(main, advisor, entry={"includeErrors": include_errors})
    _, handle, state, messages = await _run(
        start_worker, temporal_client, definitions, options={"modelMaxAttempts": 1}
    )
    assert state.stop_reason == "stop_on_response"
    assert messages[-1].content == "The advisor is down."
    result = _tool_result(messages, "advisor")
    assert result["status"] == "error" and result["error_code"] == "model_failed"
    assert result["result"] == {"toolCalls": []}
    if include_errors:
        assert "advisor model broke" in result["error"]
    else:
        assert result["error"] == "prompt tool 'advisor' failed"
    # The first message is stored even though no model answered it.
    assert [(m.role, m.depth) for m in messages if m.depth] == [("user", 1)]
    await handle.signal("terminate", {})


async def test_step_cap_stops_a_prompt_tool(start_worker, temporal_client, scripted_server):
    """Nested steps count toward the session's step cap: a looping prompt tool stops there
    with an error result, and the session ends on the cap."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "unreachable"}]})
    advisor = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "X"}}], "repeat": 9}
            ]
        },
    )
    _, handle, state, messages = await _run(
        start_worker,
        temporal_client,
        prompt_tool_definitions(main, advisor),
        options={"maxTotalSteps": 3},
    )
    assert state.stop_reason == "max_total_steps"
    assert state.counters.steps == 3
    result = _tool_result(messages, "advisor")
    assert result["error_code"] == "max_total_steps"
    assert "step cap (3 steps in a session)" in result["error"]
    assert [c["name"] for c in result["result"]["toolCalls"]] == ["weather", "weather"]
    await handle.signal("terminate", {})


async def test_nested_prompt_tool(start_worker, temporal_client, scripted_server):
    """A prompt tool that calls another runs it at depth 2, under its own call; the inner
    one's includeChat shows its caller's (the outer prompt tool's) conversation."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "All done."}]})
    advisor = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "deep", "arguments": {"message": "Go deeper"}}]},
                {"text": "Advisor done."},
            ]
        },
    )
    deep = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "deep note"}}]},
                {"text": "Deep done."},
            ]
        },
    )
    definitions = prompt_tool_definitions(
        main, advisor, deep=deep, deep_fields={"includeChat": True}
    )
    worker, handle, state, messages = await _run(start_worker, temporal_client, definitions)
    assert state.counters.steps == 6
    outer = tool_calls_of(messages[1])[0].id
    inner = tool_calls_of(next(m for m in messages if m.depth == 1 and m.tool_calls))[0].id
    assert [(m.role, m.depth, m.parent_id) for m in messages] == [
        ("user", 0, None),
        ("assistant", 0, None),
        ("user", 1, outer),
        ("assistant", 1, outer),
        ("user", 2, inner),
        ("assistant", 2, inner),
        ("tool", 2, inner),
        ("assistant", 2, inner),
        ("tool", 1, outer),
        ("assistant", 1, outer),
        ("tool", 0, None),
        ("assistant", 0, None),
    ]
    assert _tool_result(messages, "deep")["result"]["response"] == "Deep done."
    assert _tool_result(messages, "advisor")["result"] == {
        "response": "Advisor done.",
        "toolCalls": [{"name": "deep", "arguments": {"message": "Go deeper"}, "status": "success"}],
    }
    assert store_of(worker).values.get(handle.id, "notes") == ["deep note"]
    # includeChat: the advisor's conversation before the call, not the main transcript.
    first = _requests(scripted_server, deep)[0]
    assert _said(first) == [
        ("system", "You are the deep thinker."),
        ("user", "Check Paris"),
        ("user", "Go deeper"),
    ]
    events = store_of(worker).events.read(handle.id, limit=10_000)
    deep_steps = {m.metadata["stepId"] for m in messages if m.depth == 2 and m.role == "assistant"}
    inside = [e for e in events if e.step_id in deep_steps]
    assert inside and all(
        e.payload["parentToolCallId"] == inner and e.payload["depth"] == 2 for e in inside
    )
    await handle.signal("terminate", {})


async def test_unlisted_tool_is_refused_inside(start_worker, temporal_client, scripted_server):
    """Inside a prompt tool only the tools its prompt lists run: `note` (the thread has it,
    the advisor does not list it) is an unknown tool there."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "ok"}]})
    advisor = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "x"}}]},
                {"text": "Could not."},
            ]
        },
    )
    worker, handle, _, messages = await _run(
        start_worker, temporal_client, prompt_tool_definitions(main, advisor)
    )
    [call] = _tool_result(messages, "advisor")["result"]["toolCalls"]
    assert call["status"] == "error" and call["error"].startswith("unknown tool 'note'")
    assert store_of(worker).values.get(handle.id, "notes") is None
    await handle.signal("terminate", {})


async def test_ask_human_inside_uses_the_prompts_options(
    start_worker, temporal_client, scripted_server
):
    """ask_human inside a prompt tool waits like any other, with the options of the
    prompt that lists it: here its timeout and default answer."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "ok"}]})
    advisor = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "ask_human", "arguments": {"question": "Which city?"}}]},
                {"text": "Lisbon it is."},
            ]
        },
    )
    options = {"timeoutSeconds": 1, "default": "Lisbon"}
    definitions = prompt_tool_definitions(
        main, advisor, advisor_fields={"tools": [{"name": "ask_human", "options": options}]}
    )
    _, handle, _, messages = await _run(start_worker, temporal_client, definitions)
    [answer] = [m for m in messages if m.role == "tool" and m.name == "ask_human"]
    assert answer.depth == 1
    assert json.loads(content_of(answer)) == {"status": "success", "result": "Lisbon"}
    assert _tool_result(messages, "advisor")["result"]["response"] == "Lisbon it is."
    await handle.signal("terminate", {})


async def test_terminate_aborts_a_prompt_tool(start_worker, temporal_client, scripted_server):
    """terminate while the prompt's model streams aborts the prompt tool: its call gets an
    `aborted` result and the thread closes."""
    main = add_script(scripted_server, {"replies": [ASK, {"text": "never"}]})
    advisor = add_script(scripted_server, {"replies": [{"text": "slow", "delay_ms": 20_000}]})
    worker = await start_worker(prompt_tool_definitions(main, advisor))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    for _ in range(400):
        if _requests(scripted_server, advisor):
            break
        await asyncio.sleep(0.05)
    await handle.signal("terminate", {"reason": "enough"})
    result = await handle.result()
    assert result["status"] == "cancelled"
    messages = store_of(worker).messages.list(handle.id)
    failed = _tool_result(messages, "advisor")
    assert failed["status"] == "error" and failed["error_code"] == "aborted"
    assert not [m for m in messages if m.role == "assistant" and m.depth == 1]
