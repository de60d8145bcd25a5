"""The Anthropic Messages adapter against the scripted model server."""

from __future__ import annotations

import json

import httpx
import pytest
from providers_support import AddScript, records_for
from temporalio.exceptions import ApplicationError

from weft.activities.providers import AnthropicMessagesProvider, ChatRequest, Delta
from weft.workers.scripted_model import ScriptedModelServer


def user(text: str, *, model: str, **extra: object) -> ChatRequest:
    """A one-message request."""
    return ChatRequest(model=model, messages=[{"role": "user", "content": text}], **extra)


async def test_text_and_thinking_stream(
    anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """text_delta and thinking_delta events stream as deltas and assemble into the reply."""
    model = add_script({"replies": [{"text": "Bonjour tout le monde", "reasoning": "French?"}]})
    deltas: list[Delta] = []

    async def collect(delta: Delta) -> None:
        deltas.append(delta)

    reply = await anthropic.complete(user("hi", model=model), on_delta=collect)
    assert reply.content == "Bonjour tout le monde"
    assert reply.reasoning_content == "French?"
    assert reply.finish_reason == "stop"
    assert len([d for d in deltas if d.kind == "text"]) >= 3
    assert "".join(d.text for d in deltas if d.kind == "reasoning") == "French?"


async def test_tool_use_input_json_across_chunks(
    anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """tool_use blocks whose input_json_delta spans chunks become OpenAI-shaped tool calls."""
    args = {"path": "/tmp/notes.txt", "content": "a fairly long line of text"}
    model = add_script(
        {
            "replies": [
                {
                    "text": "Writing.",
                    "tool_calls": [{"name": "write", "arguments": args}, {"name": "ls"}],
                    "chunk_size": 5,
                }
            ]
        }
    )
    indexes: list[int | None] = []

    async def collect(delta: Delta) -> None:
        if delta.kind == "tool_call":
            indexes.append(delta.tool_call_index)

    reply = await anthropic.complete(user("save it", model=model), on_delta=collect)
    assert reply.content == "Writing."
    assert [c.function.name for c in reply.tool_calls] == ["write", "ls"]
    assert json.loads(reply.tool_calls[0].function.arguments) == args
    assert reply.tool_calls[0].id.startswith("toolu_")
    assert reply.finish_reason == "tool_calls"
    assert indexes.count(0) > 3 and indexes[-1] == 1  # positions, not Anthropic block indexes


async def test_request_mapping(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """System, tool calls, tool results (merged), tools and tool choice map to Anthropic shape."""
    expect = {"has_tool_result_for": "b", "system_contains": "brief", "messages_count": 5}
    model = add_script({"replies": [{"text": "first"}, {"text": "done", "expect": expect}]})
    calls = [
        {"id": "t1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
        {"id": "t2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "do both"},
        {"role": "assistant", "content": "On it.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "t1", "content": "one"},
        {"role": "tool", "tool_call_id": "t2", "content": "two"},
    ]
    tools = [{"name": "a", "description": "A", "parameters": {"type": "object"}}]
    request = ChatRequest(
        model=model,
        messages=messages,
        tools=tools,
        tool_choice="required",
        parallel_tool_calls=False,
    )
    reply = await anthropic.complete(request)
    assert reply.content == "done"
    record = records_for(server, model)[0]
    assert record["system"] == "Be brief."
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "user"]
    assert record["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "t1",
        "name": "a",
        "input": {"x": 1},
    }
    assert record["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
        {"type": "tool_result", "tool_use_id": "t2", "content": "two"},
    ]
    assert record["tools"] == [
        {"name": "a", "description": "A", "input_schema": {"type": "object"}}
    ]
    assert record["params"]["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert record["params"]["max_tokens"] == 4096


async def test_reply_index_counts_assistant_turns_after_tool_results(
    anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """A user message holding only tool results does not restart the script's reply count."""
    model = add_script({"replies": [{"tool_calls": [{"name": "a"}]}, {"text": "second"}]})
    first = await anthropic.complete(user("go", model=model))
    call = first.tool_calls[0]
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "result"},
    ]
    second = await anthropic.complete(ChatRequest(model=model, messages=messages))
    assert second.content == "second"


async def test_usage(anthropic: AnthropicMessagesProvider, add_script: AddScript) -> None:
    """Usage combines message_start input (with cache reads) and message_delta output."""
    usage = {"input_tokens": 500, "output_tokens": 42, "cached_tokens": 300}
    model = add_script({"replies": [{"text": "ok", "usage": usage}]})
    reply = await anthropic.complete(user("hi", model=model))
    assert reply.usage.model_dump() == usage


async def test_overloaded_is_retryable_with_delay(
    anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """A 529 with retry-after-ms is retryable and asks for that delay."""
    error = {"status": 529, "headers": {"retry-after-ms": "1500"}}
    model = add_script({"replies": [{"text": "fine", "error": error, "times": 1}]})
    with pytest.raises(ApplicationError) as failed:
        await anthropic.complete(user("hi", model=model))
    assert not failed.value.non_retryable
    assert failed.value.next_retry_delay is not None
    assert failed.value.next_retry_delay.total_seconds() == 1.5
    assert "overloaded_error" in failed.value.message
    assert (await anthropic.complete(user("hi", model=model))).content == "fine"


async def test_unauthorized_is_not_retryable(
    anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """A 401 is a non-retryable ProviderRequestRejected."""
    model = add_script({"replies": [{"error": {"status": 401}}]})
    with pytest.raises(ApplicationError) as failed:
        await anthropic.complete(user("hi", model=model))
    assert failed.value.non_retryable and failed.value.type == "ProviderRequestRejected"


async def test_truncated_stream(
    anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """A stream without message_stop is a retryable ProviderProtocolError."""
    model = add_script({"replies": [{"text": "cut short", "truncate": True}]})
    with pytest.raises(ApplicationError) as failed:
        await anthropic.complete(user("hi", model=model))
    assert failed.value.type == "ProviderProtocolError" and "message_stop" in failed.value.message
    assert not failed.value.non_retryable


async def test_non_streaming_fallback(
    anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """`stream: False` reads a whole Messages reply, tool calls included."""
    model = add_script(
        {"replies": [{"text": "t", "tool_calls": [{"name": "a", "arguments": {"k": 1}}]}]}
    )
    reply = await anthropic.complete(user("hi", model=model, provider_options={"stream": False}))
    assert reply.content == "t"
    assert json.loads(reply.tool_calls[0].function.arguments) == {"k": 1}
    assert reply.finish_reason == "tool_calls"


async def test_stream_error_event_is_classified() -> None:
    """An `error` event inside a 200 stream is classified like its HTTP status (529: retry)."""
    events = (
        'event: message_start\ndata: {"type": "message_start", "message": {"usage": {}}}\n\n'
        'event: error\ndata: {"type": "error", "error": {"type": "overloaded_error", '
        '"message": "Overloaded"}}\n\n'
    )

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=events, headers={"content-type": "text/event-stream"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        provider = AnthropicMessagesProvider(client, base_url="http://model.test", api_key="k")
        with pytest.raises(ApplicationError) as failed:
            await provider.complete(user("hi", model="m"))
    assert not failed.value.non_retryable
    assert "529" in failed.value.message and "Overloaded" in failed.value.message
