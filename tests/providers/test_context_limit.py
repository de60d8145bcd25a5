"""A script's `context_limit` over real HTTP, and both adapters' ProviderContextLengthExceeded."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from providers_support import AddScript, records_for
from temporalio.exceptions import ApplicationError

from weft.activities.providers import AnthropicMessagesProvider, ChatRequest, OpenAIChatProvider
from weft.contract.context_tokens import estimate_message_tokens
from weft.workers.scripted_model import ScriptedModelServer, ScriptError

LIMIT = 50
SMALL = [{"role": "user", "content": "hi"}]
# 400 ASCII bytes: 100 tokens plus the 4-token message overhead.
BIG = [{"role": "user", "content": "x" * 400}]
BIG_TOKENS = 104

OPENAI_OVERFLOW = {
    "error": {
        "message": (
            f"This model's maximum context length is {LIMIT} tokens. However, your messages "
            f"resulted in {BIG_TOKENS} tokens. Please reduce the length of the messages."
        ),
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC_OVERFLOW = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": f"prompt is too long: {BIG_TOKENS} tokens > {LIMIT} maximum",
    },
}


def limited(add_script: AddScript) -> str:
    """A script with a 50-token context limit that otherwise answers 'ok'."""
    return add_script({"context_limit": LIMIT, "replies": [{"text": "ok"}]})


async def post(
    client: httpx.AsyncClient, server: ScriptedModelServer, protocol: str, body: dict[str, Any]
) -> httpx.Response:
    """POST a whole (non-streaming) request on the protocol's path."""
    if protocol == "openai":
        return await client.post(f"{server.openai_base_url}/chat/completions", json=body)
    body = {"max_tokens": 64, **body}
    return await client.post(f"{server.anthropic_base_url}/v1/messages", json=body)


@pytest.mark.parametrize(
    ("protocol", "expected"), [("openai", OPENAI_OVERFLOW), ("anthropic", ANTHROPIC_OVERFLOW)]
)
async def test_server_answers_small_and_refuses_oversized(
    client: httpx.AsyncClient,
    server: ScriptedModelServer,
    add_script: AddScript,
    protocol: str,
    expected: dict[str, Any],
) -> None:
    """Under the limit the script plays; over it the reply is the provider's exact 400 body."""
    model = limited(add_script)
    small = await post(client, server, protocol, {"model": model, "messages": SMALL})
    assert small.status_code == 200
    big = await post(client, server, protocol, {"model": model, "messages": BIG})
    assert big.status_code == 400 and big.json() == expected
    records = records_for(server, model)
    assert [r["status"] for r in records] == [200, 400]
    assert max(r["request_tokens"] for r in records) == BIG_TOKENS
    assert records[0]["request_tokens"] == estimate_message_tokens(SMALL)


async def test_every_request_records_its_size(
    client: httpx.AsyncClient, server: ScriptedModelServer, add_script: AddScript
) -> None:
    """Scripts without a limit still record request_tokens, system prompt and tools included."""
    model = add_script({"replies": [{"tool_calls": [{"name": "f"}]}, {"text": "done"}]})
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "x" * 4000},
    ]
    first = await post(client, server, "openai", {"model": model, "messages": messages})
    call = first.json()["choices"][0]["message"]
    messages += [
        call,
        {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "r"},
    ]
    await post(client, server, "openai", {"model": model, "messages": messages})
    sizes = [r["request_tokens"] for r in records_for(server, model)]
    assert sizes == [estimate_message_tokens(messages[:2]), estimate_message_tokens(messages)]
    assert sizes[0] == 2 * 4 + 3 + 1000


@pytest.mark.parametrize("stream", [True, False])
async def test_openai_adapter_raises_context_too_long(
    openai: OpenAIChatProvider, add_script: AddScript, stream: bool
) -> None:
    """The OpenAI adapter turns the overflow 400 into a non-retryable error with both numbers."""
    model = limited(add_script)
    assert (await openai.complete(ChatRequest(model=model, messages=SMALL))).content == "ok"
    request = ChatRequest(model=model, messages=BIG, provider_options={"stream": stream})
    with pytest.raises(ApplicationError) as failed:
        await openai.complete(request)
    error = failed.value
    assert error.type == "ProviderContextLengthExceeded" and error.non_retryable
    assert error.details[0]["max_context_tokens"] == LIMIT
    assert error.details[0]["request_tokens"] == BIG_TOKENS
    assert error.details[0]["status"] == 400


@pytest.mark.parametrize("stream", [True, False])
async def test_anthropic_adapter_raises_context_too_long(
    anthropic: AnthropicMessagesProvider, add_script: AddScript, stream: bool
) -> None:
    """The Anthropic adapter does the same; the server sizes the mapped request like OpenAI's."""
    model = limited(add_script)
    messages = [{"role": "system", "content": "Be brief."}, *BIG]
    request = ChatRequest(model=model, messages=messages, provider_options={"stream": stream})
    with pytest.raises(ApplicationError) as failed:
        await anthropic.complete(request)
    error = failed.value
    assert error.type == "ProviderContextLengthExceeded" and error.non_retryable
    assert error.details[0]["max_context_tokens"] == LIMIT
    assert error.details[0]["request_tokens"] == estimate_message_tokens(messages)


async def test_ordinary_400_stays_rejected(
    openai: OpenAIChatProvider, anthropic: AnthropicMessagesProvider, add_script: AddScript
) -> None:
    """A 400 that is not about context length is still ProviderRequestRejected on both adapters."""
    model = add_script({"context_limit": 10_000, "replies": [{"error": {"status": 400}}]})
    for provider in (openai, anthropic):
        with pytest.raises(ApplicationError) as failed:
            await provider.complete(ChatRequest(model=model, messages=SMALL))
        assert failed.value.type == "ProviderRequestRejected" and failed.value.non_retryable


@pytest.mark.parametrize("bad", [0, -5, "100", 1.5, True])
def test_bad_context_limit_names_the_field(bad: object) -> None:
    """A context_limit that is not a positive int is a ScriptError naming the field."""
    with pytest.raises(ScriptError, match="'tight'.*context_limit"):
        ScriptedModelServer({"tight": {"context_limit": bad, "replies": [{"text": "x"}]}})
