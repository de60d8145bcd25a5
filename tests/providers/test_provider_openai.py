"""The OpenAI Chat Completions adapter against the scripted model server."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from providers_support import AddScript, records_for
from temporalio.exceptions import ApplicationError

from weft.activities.context_window import Frame, build_window
from weft.activities.providers import ChatRequest, Delta, OpenAIChatProvider
from weft.activities.providers.openai_chat import joined_body
from weft.contract.definitions import PromptDef
from weft.contract.messages import Message
from weft.workers.scripted_model import ScriptedModelServer


def user(text: str, *, model: str, **extra: object) -> ChatRequest:
    """A one-message request."""
    return ChatRequest(model=model, messages=[{"role": "user", "content": text}], **extra)


async def test_text_streams_in_several_deltas(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Streamed text arrives as several deltas that reassemble into the scripted text."""
    text = "The quick brown fox jumps over the lazy dog."
    model = add_script({"replies": [{"text": text, "chunk_size": 5}]})
    deltas: list[Delta] = []

    async def collect(delta: Delta) -> None:
        deltas.append(delta)

    reply = await openai.complete(user("hi", model=model), on_delta=collect)
    assert reply.content == text
    assert reply.finish_reason == "stop"
    assert len(deltas) >= 5
    assert "".join(d.text for d in deltas if d.kind == "text") == text


async def test_tool_calls_assembled_across_interleaved_chunks(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Two tool calls whose argument chunks interleave by index are assembled correctly."""
    args_a = {"city": "Paris", "units": "metric", "days": 5}
    args_b = {"query": "weather tomorrow in Lyon"}
    model = add_script(
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "forecast", "arguments": args_a},
                        {"name": "search", "arguments": args_b},
                    ],
                    "chunk_size": 4,
                    "interleave_tool_calls": True,
                }
            ]
        }
    )
    indexes: list[int | None] = []

    async def collect(delta: Delta) -> None:
        indexes.append(delta.tool_call_index)

    reply = await openai.complete(user("weather?", model=model), on_delta=collect)
    assert [c.function.name for c in reply.tool_calls] == ["forecast", "search"]
    assert json.loads(reply.tool_calls[0].function.arguments) == args_a
    assert json.loads(reply.tool_calls[1].function.arguments) == args_b
    assert reply.finish_reason == "tool_calls"
    assert indexes[:4] == [0, 1, 0, 1]  # really interleaved on the wire


async def test_usage_and_reasoning_recorded(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Usage from the final chunk and reasoning deltas end up in the reply."""
    usage = {"input_tokens": 120, "output_tokens": 7, "cached_tokens": 100}
    model = add_script({"replies": [{"text": "ok", "reasoning": "let me think", "usage": usage}]})
    reply = await openai.complete(user("hi", model=model))
    assert reply.usage.model_dump() == usage
    assert reply.reasoning_content == "let me think"


async def test_default_usage_is_estimated(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Without an override, usage is estimated from characters (about four per token)."""
    model = add_script({"replies": [{"text": "x" * 400}]})
    reply = await openai.complete(user("hello", model=model))
    assert reply.usage.output_tokens == 100
    assert reply.usage.input_tokens > 0


async def test_non_streaming_fallback(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """`stream: False` in provider_options asks for and parses a whole completion."""
    model = add_script({"replies": [{"text": "whole", "tool_calls": [{"name": "t"}]}]})
    reply = await openai.complete(user("hi", model=model, provider_options={"stream": False}))
    assert reply.content == "whole"
    assert reply.tool_calls[0].function.arguments == "{}"
    assert records_for(server, model)[0]["params"]["stream"] is False


async def test_500_then_success_with_times(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """A scripted 500 for the first request is retryable, and the retry gets the reply."""
    model = add_script({"replies": [{"text": "recovered", "error": {"status": 500}, "times": 1}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert not failed.value.non_retryable
    assert failed.value.type == "ProviderRetryableError"
    assert "500" in failed.value.message
    reply = await openai.complete(user("hi", model=model))
    assert reply.content == "recovered"


async def test_429_retry_after_sets_next_retry_delay(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """A 429 with Retry-After: 7 becomes a retryable error asking for a 7 s delay."""
    error = {"status": 429, "headers": {"Retry-After": "7"}}
    model = add_script({"replies": [{"text": "later", "error": error, "times": 1}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert failed.value.type == "ProviderRateLimited"
    assert not failed.value.non_retryable
    assert failed.value.next_retry_delay is not None
    assert failed.value.next_retry_delay.total_seconds() == 7


async def test_400_is_not_retryable(openai: OpenAIChatProvider, add_script: AddScript) -> None:
    """A scripted 400 is non-retryable and its message quotes the body."""
    error = {"status": 400, "body": {"error": {"message": "context too long"}}}
    model = add_script({"replies": [{"error": error}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert failed.value.non_retryable
    assert failed.value.type == "ProviderRequestRejected"
    assert "400" in failed.value.message and "context too long" in failed.value.message


async def test_dropped_connection_is_retryable(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """A connection closed mid-stream is a retryable ProviderConnectionError; the retry works."""
    model = add_script({"replies": [{"text": "a" * 80, "drop_after_chunks": 3, "times": 1}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert failed.value.type == "ProviderConnectionError"
    assert not failed.value.non_retryable
    assert (await openai.complete(user("hi", model=model))).content == "a" * 80


async def test_truncated_stream_is_retryable(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """A stream that ends cleanly but without [DONE] is a retryable ProviderProtocolError."""
    model = add_script({"replies": [{"text": "partial answer", "truncate": True}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert failed.value.type == "ProviderProtocolError"
    assert not failed.value.non_retryable
    assert "[DONE]" in failed.value.message


async def test_invalid_json_chunk_is_named(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """A chunk that is not JSON raises ProviderProtocolError naming the stream chunk."""
    model = add_script({"replies": [{"text": "hello world", "invalid_json_after_chunks": 2}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert failed.value.type == "ProviderProtocolError"
    assert "invalid JSON in stream chunk" in failed.value.message
    assert "oops" in failed.value.message


async def test_invalid_tool_arguments_are_named(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Complete tool-call arguments that are not JSON name the tool in the protocol error."""
    model = add_script({"replies": [{"tool_calls": [{"name": "lookup", "arguments": '{"q": '}]}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert failed.value.type == "ProviderProtocolError"
    assert "lookup" in failed.value.message and "arguments" in failed.value.message


async def test_expectation_failure_is_non_retryable_400(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """A broken expectation is a non-retryable 400 that names the expectation, and is recorded."""
    expect = {"system_contains": "You are Weft", "tools_include": ["search"]}
    model = add_script({"replies": [{"text": "never", "expect": expect}]})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model=model))
    assert failed.value.non_retryable
    assert "system_contains 'You are Weft'" in failed.value.message
    assert "tools_include ['search']" in failed.value.message
    record = records_for(server, model)[0]
    assert record["status"] == 400 and "expectation failed" in record["error"]


async def test_expectations_pass_on_a_matching_request(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """A request meeting every expectation gets the scripted reply."""
    expect = {
        "last_user_contains": "weather",
        "has_tool_result_for": "forecast",
        "system_contains": "helpful",
        "tools_include": ["forecast"],
        "messages_count": 4,
    }
    model = add_script(
        {"replies": [{"tool_calls": [{"name": "forecast"}]}, {"text": "sunny", "expect": expect}]}
    )
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "user", "content": "what's the weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "forecast", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sun"},
    ]
    tools = [{"name": "forecast", "description": "d", "parameters": {"type": "object"}}]
    reply = await openai.complete(ChatRequest(model=model, messages=messages, tools=tools))
    assert reply.content == "sunny"


async def test_turns_match_last_user_message(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Turns are chosen by substring or regex on the last user message, first match wins."""
    model = add_script(
        {
            "turns": [
                {"match": "regex:^bye\\b", "replies": [{"text": "goodbye"}]},
                {"match": "weather", "replies": [{"text": "sunny"}]},
                {"match": "*", "replies": [{"text": "default"}]},
            ]
        }
    )
    assert (await openai.complete(user("bye now", model=model))).content == "goodbye"
    assert (await openai.complete(user("the weather?", model=model))).content == "sunny"
    assert (await openai.complete(user("goodbye", model=model))).content == "default"


async def test_concurrent_conversations_each_follow_the_script(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Fifty concurrent conversations at different steps each get their own scripted reply."""
    model = add_script(
        {"turns": [{"match": "*", "replies": [{"text": f"step {i}"} for i in range(5)]}]}
    )

    async def converse(n: int) -> str | None:
        messages: list[dict[str, object]] = [{"role": "user", "content": f"conversation {n}"}]
        messages += [{"role": "assistant", "content": "earlier"}] * (n % 5)
        reply = await openai.complete(ChatRequest(model=model, messages=messages))
        return reply.content

    replies = await asyncio.gather(*(converse(n) for n in range(50)))
    assert replies == [f"step {n % 5}" for n in range(50)]


async def test_repeat_expands_an_entry(openai: OpenAIChatProvider, add_script: AddScript) -> None:
    """`repeat: N` plays one entry N times before the next entry."""
    model = add_script(
        {"replies": [{"tool_calls": [{"name": "step"}], "repeat": 200}, {"text": "done"}]}
    )
    tail = [{"role": "assistant", "content": None}] * 199
    replies = []
    for history in ([], tail):
        messages = [{"role": "user", "content": "loop"}, *history]
        replies.append(await openai.complete(ChatRequest(model=model, messages=messages)))
    assert replies[0].tool_calls[0].function.name == "step"
    assert replies[1].tool_calls[0].function.name == "step"
    messages = [{"role": "user", "content": "loop"}, *tail, {"role": "assistant", "content": None}]
    assert (await openai.complete(ChatRequest(model=model, messages=messages))).content == "done"


async def test_tool_call_ids_are_deterministic(
    openai: OpenAIChatProvider, add_script: AddScript
) -> None:
    """Tool-call ids repeat for a retried request and differ between conversations."""
    model = add_script({"replies": [{"tool_calls": [{"name": "a"}, {"name": "b"}]}]})
    first = await openai.complete(user("one", model=model))
    again = await openai.complete(user("one", model=model))
    other = await openai.complete(user("two", model=model))
    ids = [c.id for c in first.tool_calls]
    assert ids == [c.id for c in again.tool_calls]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    assert set(ids).isdisjoint(c.id for c in other.tool_calls)


async def test_request_body_shape(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer
) -> None:
    """Tools, tool choice, token limit and provider options reach the wire in OpenAI shape."""
    model = add_script({"replies": [{"text": "ok"}]})
    request = user(
        "hi",
        model=model,
        tools=[{"name": "t", "description": "a tool", "parameters": {"type": "object"}}],
        tool_choice="required",
        parallel_tool_calls=False,
        max_output_tokens=50,
        provider_options={"temperature": 0.2},
    )
    await openai.complete(request)
    record = records_for(server, model)[0]
    assert record["tools"][0]["function"]["name"] == "t"
    params = record["params"]
    assert params["stream_options"] == {"include_usage": True}
    assert params["tool_choice"] == "required" and params["parallel_tool_calls"] is False
    assert params["max_completion_tokens"] == 50 and params["temperature"] == 0.2


async def test_unknown_script_is_not_retryable(openai: OpenAIChatProvider) -> None:
    """A model name with no script is a non-retryable 404 naming the model."""
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(user("hi", model="no-such-script"))
    assert failed.value.non_retryable and "no-such-script" in failed.value.message


async def test_read_timeout_is_retryable(
    server: ScriptedModelServer, add_script: AddScript
) -> None:
    """A reply slower than the client's read timeout is a retryable ProviderConnectionError."""
    model = add_script({"replies": [{"text": "too late", "delay_ms": 500}]})
    timeout = httpx.Timeout(5.0, read=0.05)
    async with httpx.AsyncClient(timeout=timeout) as client:
        provider = OpenAIChatProvider(client, base_url=server.openai_base_url, api_key=None)
        with pytest.raises(ApplicationError) as failed:
            await provider.complete(user("hi", model=model))
    assert failed.value.type == "ProviderConnectionError" and not failed.value.non_retryable
    assert "ReadTimeout" in failed.value.message


async def test_connection_refused_is_retryable(add_script: AddScript) -> None:
    """Nothing listening at the base URL is a retryable ProviderConnectionError."""
    async with ScriptedModelServer() as stopped:
        base_url = stopped.openai_base_url
    async with httpx.AsyncClient() as client:
        provider = OpenAIChatProvider(client, base_url=base_url, api_key=None)
        with pytest.raises(ApplicationError) as failed:
            await provider.complete(user("hi", model="any"))
    assert failed.value.type == "ProviderConnectionError" and not failed.value.non_retryable


def _window_request(model: str, **extra: object) -> ChatRequest:
    """A request whose messages come with their encoded JSON, as a window builds them."""
    frame = Frame(
        prompt=PromptDef(name="p", tool_description="p", model=model, prompt="Be brief."),
        system="Be brief, façade ✓.",
        tools=[],
        dual=False,
    )
    said = [
        Message(id="u", thread_id="t", position=0, role="user", content="héllo", created_at=1),
        Message(id="a", thread_id="t", position=1, role="assistant", content="ok", created_at=1),
        Message(id="v", thread_id="t", position=2, role="user", content="and?", created_at=1),
    ]
    window = build_window(frame, None, [], said, side="a", cap=1_000)
    assert window.encoded is not None
    return ChatRequest(
        model=model, messages=window.messages, encoded_messages=window.encoded, **extra
    )


def test_a_body_joined_from_encoded_messages_is_the_body_httpx_would_encode() -> None:
    """The joined bytes parse to exactly the body the adapter builds; when the adapter
    would change a message, or options replace them, the body is left for httpx."""
    provider = OpenAIChatProvider(httpx.AsyncClient(), base_url="http://x/v1", api_key=None)
    request = _window_request("m", max_output_tokens=9, provider_options={"temperature": 0.5})
    body = provider.build_body(request)
    joined = joined_body(body, request)
    assert isinstance(joined, bytes)
    assert json.loads(joined) == body
    thinking = {"role": "assistant", "content": "x", "thinking": {"text": "t", "signature": "s"}}
    assert request.encoded_messages is not None
    for changed in (
        request.model_copy(update={"messages": [*request.messages[:-1], thinking]}),
        request.model_copy(update={"provider_options": {"messages": []}}),
        request.model_copy(update={"encoded_messages": request.encoded_messages[:-1]}),
        request.model_copy(update={"encoded_messages": None}),
    ):
        assert joined_body(provider.build_body(changed), changed) == provider.build_body(changed)


@pytest.mark.parametrize("stream", [True, False])
async def test_joined_and_encoded_bodies_reach_the_server_alike(
    openai: OpenAIChatProvider, add_script: AddScript, server: ScriptedModelServer, stream: bool
) -> None:
    """The server reads the same request from the joined body as from httpx's own."""
    model = add_script({"replies": [{"text": "ok", "repeat": 2}]})
    request = _window_request(model, stream=stream, max_output_tokens=20)
    assert (await openai.complete(request)).content == "ok"
    plain = request.model_copy(update={"encoded_messages": None})
    assert (await openai.complete(plain)).content == "ok"
    joined, encoded = (
        {k: v for k, v in r.items() if k not in ("seq", "received_at")}
        for r in records_for(server, model)
    )
    assert joined["messages"][1]["content"] == "héllo"
    assert joined == encoded
