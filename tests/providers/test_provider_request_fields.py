"""Structured output, reasoning, provider tools and non-streamed calls on both adapters' wires.

Every body is read back from the scripted server's record of what arrived, and every reply
is the server's rendering of each provider's real protocol.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from providers_support import AddScript, records_for
from temporalio.exceptions import ApplicationError

from weft.activities.providers import (
    AnthropicMessagesProvider,
    ChatRequest,
    Delta,
    OpenAIChatProvider,
)
from weft.activities.providers.reasoning import reasoning_of
from weft.workers.scripted_model import ScriptedModelServer

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "celsius"],
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
}
ANSWER = {"city": "Lisbon", "celsius": 21}
WEATHER = {
    "name": "weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
}
SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}


def user(text: str, *, model: str, **extra: Any) -> ChatRequest:
    """A one-message request."""
    return ChatRequest(model=model, messages=[{"role": "user", "content": text}], **extra)


class Collected:
    """Deltas an adapter reported, by kind."""

    def __init__(self) -> None:
        self.deltas: list[Delta] = []

    async def __call__(self, delta: Delta) -> None:
        self.deltas.append(delta)

    def text(self, kind: str) -> str:
        return "".join(d.text for d in self.deltas if d.kind == kind)


async def test_openai_body_carries_every_request_field(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """Tools then provider tools, parallel_tool_calls, tool_choice, a strict response_format,
    reasoning_effort and provider options (merged last) all reach the OpenAI wire."""
    model = add_script({"replies": [{"text": json.dumps(ANSWER), "reasoning": "hmm"}]})
    reply = await openai.complete(
        user(
            "weather?",
            model=model,
            tools=[WEATHER],
            provider_tools=[{"type": "web_search"}],
            parallel_tool_calls=False,
            tool_choice="auto",
            response_schema=SCHEMA,
            reasoning=reasoning_of({"effort": "low"}),
            provider_options={"temperature": 0.2, "reasoning_effort": "minimal"},
        )
    )
    [record] = records_for(server, model)
    params = record["params"]
    assert [t.get("function", {}).get("name", t["type"]) for t in record["tools"]] == [
        "weather",
        "web_search",
    ]
    assert record["tools"][1] == {"type": "web_search"}
    assert params["parallel_tool_calls"] is False and params["tool_choice"] == "auto"
    assert params["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "structured_output", "schema": SCHEMA, "strict": True},
    }
    # providerOptions are merged last, so they override what the adapter derived.
    assert params["reasoning_effort"] == "minimal" and params["temperature"] == 0.2
    assert json.loads(reply.content or "") == ANSWER


@pytest.mark.parametrize(
    ("reasoning", "effort"),
    [
        ({"effort": "high"}, "high"),
        ({"maxTokens": 1500}, "low"),
        ({"budgetTokens": 6000}, "medium"),
        ({"maxTokens": 50_000}, "high"),
        ({"enabled": True}, "medium"),
    ],
)
async def test_openai_reasoning_effort_from_either_form(
    openai: OpenAIChatProvider,
    add_script: AddScript,
    server: ScriptedModelServer,
    reasoning: dict[str, Any],
    effort: str,
) -> None:
    """An effort is sent as is; a token budget is sent as the smallest effort that covers it."""
    model = add_script({"replies": [{"text": "ok"}]})
    await openai.complete(user("hi", model=model, reasoning=reasoning_of(reasoning)))
    assert records_for(server, model)[0]["params"]["reasoning_effort"] == effort


async def test_openai_without_streaming_still_reports_deltas(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """`stream=False` (supportsStreaming: false) sends one plain request; listeners still get
    the reasoning and the text, once each."""
    model = add_script({"replies": [{"text": "whole answer", "reasoning": "thought"}]})
    collected = Collected()
    reply = await openai.complete(user("hi", model=model, stream=False), on_delta=collected)
    params = records_for(server, model)[0]["params"]
    assert params["stream"] is False and "stream_options" not in params
    assert (reply.content, reply.reasoning_content) == ("whole answer", "thought")
    assert [(d.kind, d.text) for d in collected.deltas] == [
        ("reasoning", "thought"),
        ("text", "whole answer"),
    ]


async def test_openai_drops_anthropic_thinking_from_history(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """Signed thinking kept for Anthropic never reaches an OpenAI body."""
    model = add_script({"replies": [{"text": "ok"}]})
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello", "thinking": {"text": "t", "signature": "s"}},
        {"role": "user", "content": "again"},
    ]
    await openai.complete(ChatRequest(model=model, messages=history))
    sent = records_for(server, model)[0]["messages"]
    assert sent[1] == {"role": "assistant", "content": "hello"}


async def test_anthropic_structured_output_is_a_forced_tool(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """Without tools of its own, the prompt's schema is a forced `structured_output` tool whose
    input comes back as the reply's text, streamed as text deltas, with no tool call."""
    model = add_script({"replies": [{"text": json.dumps(ANSWER), "chunk_size": 5}]})
    collected = Collected()
    reply = await anthropic.complete(
        user("weather?", model=model, response_schema=SCHEMA), on_delta=collected
    )
    [record] = records_for(server, model)
    assert record["tools"] == [
        {
            "name": "structured_output",
            "description": "Give your final answer: its input is the answer.",
            "input_schema": SCHEMA,
        }
    ]
    assert record["params"]["tool_choice"] == {"type": "tool", "name": "structured_output"}
    assert reply.tool_calls == [] and reply.finish_reason == "stop"
    assert json.loads(reply.content or "") == ANSWER
    assert json.loads(collected.text("text")) == ANSWER
    assert collected.text("tool_call") == ""


async def test_anthropic_structured_output_beside_prompt_tools(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """With tools, a tool call is required (`any`): a prompt tool call stays a call (and a
    structured answer beside it is dropped); a lone structured call is the answer."""
    model = add_script(
        {
            "turns": [
                {
                    "match": "first",
                    "replies": [
                        {
                            "tool_calls": [
                                {"name": "weather", "arguments": {"city": "Lisbon"}},
                                {"name": "structured_output", "arguments": ANSWER},
                            ]
                        }
                    ],
                },
                {
                    "match": "then",
                    "replies": [
                        {"tool_calls": [{"name": "structured_output", "arguments": ANSWER}]}
                    ],
                },
            ]
        }
    )
    fields: dict[str, Any] = {
        "tools": [WEATHER],
        "provider_tools": [SEARCH_TOOL],
        "parallel_tool_calls": False,
        "response_schema": SCHEMA,
    }
    calling = await anthropic.complete(user("first", model=model, **fields))
    assert [c.function.name for c in calling.tool_calls] == ["weather"]
    assert calling.finish_reason == "tool_calls" and calling.content is None
    answering = await anthropic.complete(user("then", model=model, **fields))
    assert answering.tool_calls == [] and json.loads(answering.content or "") == ANSWER
    record = records_for(server, model)[0]
    assert [t["name"] for t in record["tools"]] == ["weather", "structured_output", "web_search"]
    assert record["tools"][2] == SEARCH_TOOL
    assert record["params"]["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}


async def test_anthropic_thinking_budget_and_signature(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """An effort becomes a thinking budget (max_tokens raised above it); forced tool use is
    off while thinking; the thinking streams as reasoning and its signature is kept."""
    model = add_script({"replies": [{"text": json.dumps(ANSWER), "reasoning": "Lisbon, warm"}]})
    collected = Collected()
    reply = await anthropic.complete(
        user(
            "weather?",
            model=model,
            max_output_tokens=1000,
            response_schema=SCHEMA,
            reasoning=reasoning_of({"effort": "high"}),
        ),
        on_delta=collected,
    )
    params = records_for(server, model)[0]["params"]
    assert params["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    assert params["max_tokens"] == 16384 + 1000
    assert "tool_choice" not in params  # offered, not forced: Anthropic refuses both
    assert collected.text("reasoning") == "Lisbon, warm"
    assert reply.reasoning_content == "Lisbon, warm"
    assert reply.reasoning_signature == "scripted"
    assert json.loads(reply.content or "") == ANSWER


async def test_anthropic_tool_turn_sends_signed_thinking_back(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """While thinking, a tool-use turn carries its signed thinking first, which Anthropic
    requires; without it the provider (here the scripted server) refuses the request."""
    model = add_script({"replies": [{"tool_calls": [{"name": "weather"}]}, {"text": "done"}]})
    call = {"id": "toolu_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    assistant: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
    result = {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"}
    thinking = reasoning_of({"maxTokens": 2048})
    with pytest.raises(ApplicationError) as refused:
        await anthropic.complete(
            ChatRequest(
                model=model,
                messages=[{"role": "user", "content": "hi"}, assistant, result],
                tools=[WEATHER],
                reasoning=thinking,
            )
        )
    assert refused.value.non_retryable
    assert "must start with a thinking block" in refused.value.message
    signed = {**assistant, "thinking": {"text": "check weather", "signature": "sig-1"}}
    reply = await anthropic.complete(
        ChatRequest(
            model=model,
            messages=[{"role": "user", "content": "hi"}, signed, result],
            tools=[WEATHER],
            reasoning=thinking,
        )
    )
    assert reply.content == "done"
    sent = records_for(server, model)[-1]["messages"][1]["content"]
    assert sent[0] == {"type": "thinking", "thinking": "check weather", "signature": "sig-1"}
    assert sent[1]["type"] == "tool_use"


async def test_anthropic_without_streaming(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """`stream=False` reads a whole Messages reply: the structured answer, reasoning and its
    signature, and listeners still get the reasoning and the text."""
    model = add_script({"replies": [{"text": json.dumps(ANSWER), "reasoning": "warm"}]})
    collected = Collected()
    reply = await anthropic.complete(
        user("weather?", model=model, stream=False, response_schema=SCHEMA),
        on_delta=collected,
    )
    assert records_for(server, model)[0]["params"]["stream"] is False
    assert json.loads(reply.content or "") == ANSWER and reply.tool_calls == []
    assert (reply.reasoning_content, reply.reasoning_signature) == ("warm", "scripted")
    assert [d.kind for d in collected.deltas] == ["reasoning", "text"]
