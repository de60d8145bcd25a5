"""Reasoning and the definition fields that shape a request, through a real thread.

The bodies are read back from what the scripted server received; its Anthropic side
refuses what Anthropic refuses (thinking rules), so a wrong body fails the thread.
"""

from __future__ import annotations

import json
from typing import Any

from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    start_thread,
    wait_until,
)

from weft.definitions import Definitions, define_model, define_prompt
from weft.workers.config import ProviderConfig

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "celsius"],
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
}
ANSWER = {"city": "Lisbon", "celsius": 21}
THOUGHT = "The user wants Lisbon's weather; the tool knows it."


def _shaped(script: str, *, provider: str = "scripted", **prompt_fields: Any) -> Definitions:
    """The test helper agent with its prompt (and model) replaced by shaped ones."""
    definitions = agent_definitions(script, tools=["weather"])
    definitions.models["scripted"] = define_model(
        name="scripted",
        provider=provider,
        model=script,
        providerOptions={"temperature": 0.1, "seed": 7},
        **prompt_fields.pop("model_fields", {}),
    )
    definitions.prompts["helper_prompt"] = define_prompt(
        name="helper_prompt",
        toolDescription="helps",
        model="scripted",
        prompt="You are a helpful agent.",
        tools=["weather"],
        **prompt_fields,
    )
    return definitions


def _requests(server: Any, script: str) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["model"] == script]


async def test_reasoning_streams_as_reasoning_delta_events(
    start_worker, temporal_client, scripted_server
):
    """Reasoning arrives as schema-valid `reasoning.delta` events (never a model.delta kind),
    adds up to the stored reasoning_content, and the request asked for the prompt's effort."""
    script = add_script(
        scripted_server, {"replies": [{"reasoning": THOUGHT, "text": "Sunny.", "chunk_size": 4}]}
    )
    worker = await start_worker(_shaped(script, reasoning={"effort": "high"}))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Lisbon?"}]
    )
    await wait_until(handle, idle_after(1))
    events = worker.store.events.read(handle.id, limit=1000)
    validator = event_schema_validator()
    for event in events:
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"
    reasoning = [e for e in events if e.type == "reasoning.delta"]
    assert reasoning, "no reasoning.delta event"
    assert "".join(e.payload["text"] for e in reasoning) == THOUGHT
    assert all(e.step_id and e.model_request_id for e in reasoning)
    assert not [e for e in events if e.type == "model.delta" and e.payload["kind"] != "text"]
    streamed = "".join(e.payload["text"] for e in events if e.type == "model.delta")
    reply = worker.store.messages.list(handle.id)[-1]
    assert (reply.reasoning_content, reply.content, streamed) == (THOUGHT, "Sunny.", "Sunny.")
    assert _requests(scripted_server, script)[0]["params"]["reasoning_effort"] == "high"


async def test_openai_wire_carries_prompt_and_model_fields(
    start_worker, temporal_client, scripted_server
):
    """parallelToolCalls, toolChoice, providerOptions (the prompt's over the model's) and the
    model's providerTools (after the function tools) reach the OpenAI body."""
    script = add_script(scripted_server, {"replies": [{"text": "Sunny."}]})
    definitions = _shaped(
        script,
        parallelToolCalls=True,
        toolChoice="auto",
        providerOptions={"temperature": 0.5},
        model_fields={"providerTools": [{"type": "web_search", "search_context_size": "low"}]},
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Lisbon?"}]
    )
    await wait_until(handle, idle_after(1))
    [request] = _requests(scripted_server, script)
    params = request["params"]
    assert params["parallel_tool_calls"] is True and params["tool_choice"] == "auto"
    assert (params["temperature"], params["seed"]) == (0.5, 7)
    assert request["tools"][0]["function"]["name"] == "weather"
    assert request["tools"][-1] == {"type": "web_search", "search_context_size": "low"}
    assert "response_format" not in params and "reasoning_effort" not in params


async def test_anthropic_thinking_tools_and_structured_answer(
    start_worker, temporal_client, scripted_server, weft_config
):
    """On Anthropic, thinking (from maxTokens) and tools run a two-step turn: the tool step's
    signed thinking goes back in the next request, and the structured_output call becomes
    the parsed, stored answer."""
    weft_config.providers["anthropic"] = ProviderConfig(
        kind="anthropic", base_url=scripted_server.anthropic_base_url, api_key="test-key"
    )
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "reasoning": THOUGHT,
                    "tool_calls": [{"name": "weather", "arguments": {"city": "Lisbon"}}],
                },
                {
                    "reasoning": "21 degrees and sunny.",
                    "tool_calls": [{"name": "structured_output", "arguments": ANSWER}],
                    "expect": {"has_tool_result_for": "weather"},
                },
            ]
        },
    )
    definitions = _shaped(
        script,
        provider="anthropic",
        requiredSchema=SCHEMA,
        reasoning={"maxTokens": 2048},
        model_fields={"providerTools": [{"type": "web_search_20250305", "name": "web_search"}]},
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Lisbon?"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    messages = worker.store.messages.list(handle.id)
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1].reasoning_content == THOUGHT
    assert messages[1].metadata["reasoningSignature"] == "scripted"
    assert messages[3].tool_calls is None and messages[3].metadata["parsed"] == ANSWER
    assert json.loads(messages[3].content or "") == ANSWER
    first, second = _requests(scripted_server, script)
    assert first["params"]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    # Anthropic refuses forced tool use while thinking: the answer tool is offered.
    assert first["params"]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    assert [t["name"] for t in first["tools"]] == ["weather", "structured_output", "web_search"]
    assert first["params"]["temperature"] == 0.1
    tool_turn = second["messages"][1]["content"]
    assert tool_turn[0] == {"type": "thinking", "thinking": THOUGHT, "signature": "scripted"}
    assert second["status"] == 200


async def test_model_that_cannot_stream_gets_one_plain_request(
    start_worker, temporal_client, scripted_server, weft_config
):
    """capabilities.supportsStreaming: false sends `stream: false` (here on Anthropic, with a
    forced structured_output tool) and the whole reply still shows as one text delta."""
    weft_config.providers["anthropic"] = ProviderConfig(
        kind="anthropic", base_url=scripted_server.anthropic_base_url, api_key="test-key"
    )
    script = add_script(scripted_server, {"replies": [{"text": json.dumps(ANSWER)}]})
    definitions = _shaped(
        script,
        provider="anthropic",
        requiredSchema=SCHEMA,
        model_fields={"capabilities": {"supportsStreaming": False}},
    )
    definitions.prompts["helper_prompt"] = definitions.prompts["helper_prompt"].model_copy(
        update={"tools": []}
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "Lisbon?"}]
    )
    await wait_until(handle, idle_after(1))
    [request] = _requests(scripted_server, script)
    assert request["params"]["stream"] is False
    assert request["params"]["tool_choice"] == {"type": "tool", "name": "structured_output"}
    reply = worker.store.messages.list(handle.id)[-1]
    assert reply.metadata["parsed"] == ANSWER
    deltas = worker.store.events.read(handle.id, types=["model.delta"])
    assert [json.loads(e.payload["text"]) for e in deltas] == [ANSWER]
