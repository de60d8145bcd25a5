"""The Agent Runtime facts the model activity knows: `rate_limit.hit` with the
provider's Retry-After, `runtime.error` for a provider failure no attempt can cure and
`reasoning.summary`, `output.truncated` for a preview, through real threads, each event valid against the vendored schema."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import BaseModel
from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    start_thread,
    wait_until,
)

from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from weft.workers.config import ProviderConfig


def _with_fallback(primary: str, backup: str) -> Definitions:
    return Definitions().add(
        define_model(name="primary", provider="scripted", model=primary, fallbacks=["backup"]),
        define_model(name="backup", provider="scripted", model=backup),
        define_prompt(name="p", toolDescription="d", model="primary", prompt="Be brief."),
        define_agent(name="helper", sideA={"prompt": "p"}),
    )


def _assert_valid(events: list[Any]) -> None:
    validator = event_schema_validator()
    for event in events:
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"


async def test_a_429_is_a_rate_limit_hit_with_its_retry_after(
    start_worker, temporal_client, scripted_server
):
    """A 429 writes one rate_limit.hit naming the model and the provider's Retry-After,
    and the retried attempt answers."""
    primary = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "text": "after the wait",
                    "error": {"status": 429, "headers": {"Retry-After": "1"}},
                    "times": 1,
                }
            ]
        },
    )
    worker = await start_worker(_with_fallback(primary, primary))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "after the wait"
    events = worker.store.events.read(handle.id, limit=10_000)
    [hit] = [e for e in events if e.type == "rate_limit.hit"]
    assert hit.payload["model"] == "primary" and hit.payload["provider"] == "scripted"
    assert hit.payload["status"] == 429 and hit.payload["attempt"] == 1
    assert hit.payload["retryAfterSeconds"] == 1.0 and hit.payload["willRetry"] is True
    assert hit.step_id and hit.model_request_id
    assert not [e for e in events if e.type == "runtime.error"]
    _assert_valid(events)


async def test_a_refused_request_is_a_runtime_error_and_the_fallback_answers(
    start_worker, temporal_client, scripted_server
):
    """A provider that refuses the credentials (401) writes runtime.error once, not retried;
    the fallback model still answers."""
    primary = add_script(
        scripted_server,
        {"replies": [{"error": {"status": 401, "body": "invalid api key"}}]},
    )
    backup = add_script(scripted_server, {"replies": [{"text": "backup here"}]})
    worker = await start_worker(_with_fallback(primary, backup))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "backup here"
    events = worker.store.events.read(handle.id, limit=10_000)
    [fatal] = [e for e in events if e.type == "runtime.error"]
    assert fatal.payload["code"] == "provider_rejected" and fatal.payload["status"] == 401
    assert fatal.payload["model"] == "primary" and fatal.payload["retryable"] is False
    assert "HTTP 401" in fatal.payload["message"]
    assert not [e for e in events if e.type == "rate_limit.hit"]
    _assert_valid(events)


SUMMARY = "Checked the forecast source, then answered briefly."


async def _openrouter_like_server() -> tuple[asyncio.Server, str]:
    """A loopback OpenAI-compatible server whose streamed reply carries OpenRouter's
    `reasoning_details` (a summary, a text entry and an encrypted one)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        model = json.loads(await reader.readexactly(length))["model"]
        details = [
            {"type": "reasoning.summary", "summary": SUMMARY[:20]},
            {"type": "reasoning.text", "text": "raw thoughts"},
            {"type": "reasoning.encrypted", "data": "opaque"},
        ]
        chunks = [
            {"model": model, "choices": [{"index": 0, "delta": {"reasoning_details": details}}]},
            {
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "content": "Sunny.",
                            "reasoning_details": [
                                {"type": "reasoning.summary", "summary": SUMMARY[20:]}
                            ],
                        },
                    }
                ],
            },
            {
                "model": model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 3},
            },
        ]
        body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n"
            + f"content-length: {len(body.encode())}\r\n\r\n".encode()
            + body.encode()
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1"


async def test_a_provider_reasoning_summary_is_a_reasoning_summary_event(
    start_worker, temporal_client, weft_config
):
    """A reply whose provider summarises its reasoning writes one reasoning.summary with
    the summary text (not the raw or encrypted reasoning) and the reply's message id."""
    server, base_url = await _openrouter_like_server()
    async with server:
        weft_config.providers["router"] = ProviderConfig(
            kind="openai", base_url=base_url, api_key="test-key"
        )
        definitions = Definitions().add(
            define_model(name="m", provider="router", model="some/model"),
            define_prompt(name="p", toolDescription="d", model="m", prompt="Be brief."),
            define_agent(name="helper", sideA={"prompt": "p"}),
        )
        worker = await start_worker(definitions)
        handle = await start_thread(
            temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
        )
        state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "Sunny."
    events = worker.store.events.read(handle.id, limit=10_000)
    [summary] = [e for e in events if e.type == "reasoning.summary"]
    reply = worker.store.messages.list(handle.id)[-1]
    assert summary.payload == {"model": "m", "messageId": reply.id, "summary": SUMMARY}
    assert summary.step_id and summary.model_request_id
    _assert_valid(events)


class SizeArgs(BaseModel):
    """How many characters to return."""

    chars: int


def big(state: Any, args: SizeArgs) -> str:
    """Returns a long text, too long for the model to see whole."""
    return "".join(f"line {i:07d}\n" for i in range(args.chars // 13 + 1))[: args.chars]


async def test_a_previewed_output_is_output_truncated_once(
    start_worker, temporal_client, scripted_server
):
    """An output the model sees as a preview writes one output.truncated naming its ref,
    its length and what the model sees, though two requests carry the preview."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "big", "arguments": {"chars": 400_000}}]},
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"text": "skimmed"},
            ]
        },
    )
    definitions = agent_definitions(script, tools=["big", "weather"]).add(
        define_tool(name="big", description="A long text", args=SizeArgs, execute=big)
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.last_outcome == "skimmed"
    requests = [r for r in scripted_server.requests if r["model"] == script]
    assert sum("call read_output with" in json.dumps(r["messages"]) for r in requests) == 2
    events = worker.store.events.read(handle.id, limit=10_000)
    [cut] = [e for e in events if e.type == "output.truncated"]
    [tool] = [m for m in worker.store.messages.list(handle.id) if m.name == "big"]
    assert cut.output_ref == f"weft://threads/{handle.id}/messages/{tool.id}"
    assert cut.payload["messageId"] == tool.id and cut.payload["ref"] == cut.output_ref
    assert cut.payload["totalChars"] == 400_000 and cut.payload["reason"] == "preview"
    assert 0 < cut.payload["shownChars"] < 400_000 and cut.payload["role"] == "tool"
    _assert_valid(events)
