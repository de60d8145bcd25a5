"""Anthropic Messages adapter: maps OpenAI-shaped chat to `/v1/messages` and reads its stream.

Defaults worth knowing: `max_tokens` is required by Anthropic, so it is
`DEFAULT_MAX_TOKENS` when the request sets none; `reasoning_content` of earlier assistant
messages is not sent back (Anthropic would need the thinking block's signature);
`finish_reason` is translated to OpenAI's vocabulary; `input_tokens` includes cache reads
and writes, as OpenAI's `prompt_tokens` does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
from temporalio.exceptions import ApplicationError

from activities.providers.base import (
    ChatReply,
    ChatRequest,
    Delta,
    DeltaCallback,
    Usage,
    make_tool_call,
)
from activities.providers.errors import classify_http_error, excerpt, protocol_error
from activities.providers.sse import iter_sse
from activities.providers.transport import loads, open_stream, post_json
from contract.messages import ToolCall

DEFAULT_MAX_TOKENS = 4096
ANTHROPIC_VERSION = "2023-06-01"

_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
# Stream `error` events carry a type, not a status; map them so classification stays in one place.
_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


class AnthropicMessagesProvider:
    """Calls `{base_url}/v1/messages`; the base URL does NOT include `/v1`."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        default_max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        # The client is injected so the worker owns pooling and timeouts; httpx never retries.
        self._client = client
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._headers = {"anthropic-version": ANTHROPIC_VERSION}
        if api_key:
            self._headers["x-api-key"] = api_key
        self._default_max_tokens = default_max_tokens

    async def complete(
        self, request: ChatRequest, *, on_delta: DeltaCallback | None = None
    ) -> ChatReply:
        """Run one completion, streaming unless `provider_options["stream"] is False`."""
        body = self.build_body(request)
        if body.get("stream") is False:
            data = await post_json(self._client, self._url, body=body, headers=self._headers)
            return parse_message(data, request.model)
        state = _StreamState(model=request.model)
        async with open_stream(
            self._client, self._url, body=body, headers=self._headers
        ) as response:
            # Read to the end even after message_stop, so the connection is kept alive.
            async for event in iter_sse(response.aiter_lines()):
                if not state.done:
                    await state.feed(loads(event.data, what="stream event"), on_delta)
        if not state.done:
            raise protocol_error("stream ended without message_stop (truncated)")
        return state.reply()

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for `request`; `provider_options` are merged last."""
        system, messages = map_messages(request.messages)
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_output_tokens or self._default_max_tokens,
            "stream": True,
        }
        if system:
            body["system"] = system
        if request.tools:
            body["tools"] = [
                {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "input_schema": t.get("parameters") or {"type": "object", "properties": {}},
                }
                for t in request.tools
            ]
        choice = _tool_choice(request.tool_choice, request.parallel_tool_calls)
        if choice is not None and request.tools:
            body["tool_choice"] = choice
        body.update(request.provider_options)
        return body


def _tool_choice(choice: str | None, parallel: bool | None) -> dict[str, Any] | None:
    if choice is None and parallel is None:
        return None
    kind = {"required": "any", "none": "none"}.get(choice or "auto", "auto")
    result: dict[str, Any] = {"type": kind}
    if parallel is False and kind != "none":
        result["disable_parallel_tool_use"] = True
    return result


def map_messages(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """Split out the system text and map OpenAI messages to Anthropic content blocks.

    Tool results become `tool_result` blocks in a user message; adjacent messages of one role
    are merged, which joins consecutive tool results (and a user note after them) into one
    user message as Anthropic's strict alternation requires.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role in ("system", "developer"):
            system.append(_text_of(message.get("content")))
            continue
        if role == "tool":
            role, blocks = "user", [_tool_result(message)]
        elif role == "assistant":
            blocks = _text_blocks(message.get("content")) + [
                _tool_use(index, call) for call in message.get("tool_calls") or []
            ]
        elif role == "user":
            blocks = _text_blocks(message.get("content"))
        else:
            raise ApplicationError(
                f"message #{index} has unsupported role {role!r}",
                type="ProviderRequestRejected",
                non_retryable=True,
            )
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return "\n\n".join(s for s in system if s), out


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content or []:
        if part.get("type") == "text" and part.get("text"):
            blocks.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "image_url":
            blocks.append(_image_block(part["image_url"].get("url", "")))
    return blocks


def _image_block(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media_type, _, data = url[5:].partition(";base64,")
        source = {"type": "base64", "media_type": media_type, "data": data}
    else:
        source = {"type": "url", "url": url}
    return {"type": "image", "source": source}


def _tool_use(index: int, call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        # Stored history is ours; a retry cannot repair it, so fail loudly and for good.
        raise ApplicationError(
            f"message #{index}: tool call {call.get('id')} has arguments that are not a "
            f"JSON object: {excerpt(raw, 120)}",
            type="ProviderRequestRejected",
            non_retryable=True,
        )
    return {
        "type": "tool_use",
        "id": call.get("id"),
        "name": function.get("name"),
        "input": arguments,
    }


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.get("tool_call_id"),
        "content": _text_of(message.get("content")),
    }
    if message.get("is_error"):
        block["is_error"] = True
    return block


@dataclass
class _Block:
    type: str
    parts: list[str] = field(default_factory=list)
    id: str | None = None
    name: str | None = None
    initial_input: Any = None


@dataclass
class _StreamState:
    """Accumulates content blocks by index until `message_stop`."""

    model: str
    done: bool = False
    blocks: dict[int, _Block] = field(default_factory=dict)
    stop_reason: str | None = None
    usage: dict[str, int] = field(default_factory=dict)

    async def feed(self, event: Any, on_delta: DeltaCallback | None) -> None:
        if not isinstance(event, dict):
            raise protocol_error(f"stream event is not a JSON object: {event!r:.120}")
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.model = message.get("model") or self.model
            self.usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            self.blocks[_index(event)] = _Block(
                type=block.get("type", ""),
                id=block.get("id"),
                name=block.get("name"),
                initial_input=block.get("input"),
            )
            if block.get("text"):
                await self._append(_index(event), block["text"], on_delta)
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            piece = delta.get("text") or delta.get("thinking") or delta.get("partial_json")
            if isinstance(piece, str) and piece:
                await self._append(_index(event), piece, on_delta)
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            self.usage.update(event.get("usage") or {})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            error = event.get("error") or {}
            status = _ERROR_STATUS.get(str(error.get("type")), 500)
            raise classify_http_error(status, {}, json.dumps(event))

    async def _append(self, index: int, piece: str, on_delta: DeltaCallback | None) -> None:
        block = self.blocks.get(index)
        if block is None:
            raise protocol_error(f"delta for content block {index} that was never started")
        block.parts.append(piece)
        if on_delta is None:
            return
        if block.type == "tool_use":
            position = sum(1 for i, b in self.blocks.items() if b.type == "tool_use" and i < index)
            await on_delta(Delta(kind="tool_call", text=piece, tool_call_index=position))
        elif block.type == "thinking":
            await on_delta(Delta(kind="reasoning", text=piece))
        elif block.type == "text":
            await on_delta(Delta(kind="text", text=piece))

    def reply(self) -> ChatReply:
        ordered = [b for _, b in sorted(self.blocks.items())]
        calls = []
        for position, block in enumerate(b for b in ordered if b.type == "tool_use"):
            arguments = "".join(block.parts)
            if not arguments and block.initial_input:
                arguments = json.dumps(block.initial_input)
            calls.append(make_tool_call(position, block.id, block.name, arguments))
        return ChatReply(
            content="".join(p for b in ordered if b.type == "text" for p in b.parts) or None,
            tool_calls=calls,
            reasoning_content="".join(p for b in ordered if b.type == "thinking" for p in b.parts)
            or None,
            usage=_usage(self.usage),
            finish_reason=_FINISH_REASONS.get(self.stop_reason or "", self.stop_reason),
            model=self.model,
        )


def _index(event: dict[str, Any]) -> int:
    index = event.get("index")
    if not isinstance(index, int):
        raise protocol_error(f"{event.get('type')} event without an integer index")
    return index


def _usage(raw: dict[str, Any]) -> Usage:
    cached = raw.get("cache_read_input_tokens") or 0
    written = raw.get("cache_creation_input_tokens") or 0
    return Usage(
        input_tokens=(raw.get("input_tokens") or 0) + cached + written,
        output_tokens=raw.get("output_tokens") or 0,
        cached_tokens=cached,
    )


def parse_message(data: Any, model: str) -> ChatReply:
    """Read a non-streaming Messages reply."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise protocol_error("reply has no content list")
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    for block in data["content"]:
        if block.get("type") == "text":
            texts.append(block.get("text", ""))
        elif block.get("type") == "thinking":
            thoughts.append(block.get("thinking", ""))
        elif block.get("type") == "tool_use":
            arguments = json.dumps(block.get("input") or {})
            calls.append(make_tool_call(len(calls), block.get("id"), block.get("name"), arguments))
    stop = data.get("stop_reason")
    return ChatReply(
        content="".join(texts) or None,
        tool_calls=calls,
        reasoning_content="".join(thoughts) or None,
        usage=_usage(data.get("usage") or {}),
        finish_reason=_FINISH_REASONS.get(stop or "", stop),
        model=data.get("model") or model,
    )
