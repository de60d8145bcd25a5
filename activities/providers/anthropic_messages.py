"""Anthropic Messages adapter: maps OpenAI-shaped chat to `/v1/messages` and reads its stream.

Defaults worth knowing: `max_tokens` is required by Anthropic, so it is
`DEFAULT_MAX_TOKENS` when the request sets none (and raised above a thinking budget, which
it includes); earlier reasoning goes back only as signed thinking blocks while thinking is
enabled; `finish_reason` is translated to OpenAI's vocabulary; `input_tokens` includes cache
reads and writes, as OpenAI's `prompt_tokens` does.

Structured output (a request's `response_schema`) is a tool, `structured_output`, whose
input is the answer: forced when the prompt has no tools of its own, required as one of
the tools when it has (`tool_choice: any`), and merely offered while thinking is enabled
(Anthropic refuses forced tool use with thinking; a text answer is then the JSON). A reply
whose only tool call is `structured_output` becomes a text reply holding its input; next
to other tool calls it is dropped, since those results are still to come.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from weft.activities.providers.anthropic_mapping import map_messages
from weft.activities.providers.base import (
    STRUCTURED_OUTPUT_TOOL,
    ChatReply,
    ChatRequest,
    Delta,
    DeltaCallback,
    Usage,
    emit_whole,
    make_tool_call,
)
from weft.activities.providers.errors import classify_http_error, protocol_error
from weft.activities.providers.sse import iter_sse
from weft.activities.providers.transport import loads, open_stream, post_json

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
        """Run one completion, streamed unless the request (or `provider_options`) says not."""
        body = self.build_body(request)
        structured = request.response_schema is not None
        if body.get("stream") is False:
            data = await post_json(self._client, self._url, body=body, headers=self._headers)
            reply = parse_message(data, request.model, structured=structured)
            await emit_whole(reply, on_delta)
            return reply
        state = _StreamState(model=request.model, structured=structured)
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
        budget = request.reasoning.anthropic_budget() if request.reasoning else None
        system, messages = map_messages(request.messages, thinking=budget is not None)
        max_tokens = request.max_output_tokens or self._default_max_tokens
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "stream": request.stream,
        }
        if system:
            body["system"] = system
        if budget is not None:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
            if max_tokens <= budget:
                # max_tokens counts the thinking too: the answer keeps its own allowance.
                body["max_tokens"] = budget + max_tokens
        tools = [
            {
                "name": t["name"],
                "description": t.get("description", ""),
                "input_schema": t.get("parameters") or {"type": "object", "properties": {}},
            }
            for t in request.tools
        ]
        if request.response_schema is not None:
            tools.append(
                {
                    "name": STRUCTURED_OUTPUT_TOOL,
                    "description": "Give your final answer: its input is the answer.",
                    "input_schema": request.response_schema,
                }
            )
        tools += request.provider_tools
        if tools:
            body["tools"] = tools
            choice = _tool_choice(request, thinking=budget is not None)
            if choice is not None:
                body["tool_choice"] = choice
        body.update(request.provider_options)
        return body


def _tool_choice(request: ChatRequest, *, thinking: bool) -> dict[str, Any] | None:
    choice, parallel = request.tool_choice, request.parallel_tool_calls
    kind = {"required": "any", "none": "none"}.get(choice or "auto", "auto")
    result: dict[str, Any] = {"type": kind}
    if request.response_schema is not None and not thinking:
        if not request.tools or kind == "none":
            result = {"type": "tool", "name": STRUCTURED_OUTPUT_TOOL}
        else:
            result = {"type": "any"}  # a prompt tool, or the answer
    elif choice is None and parallel is None:
        return None
    if parallel is False and result["type"] != "none":
        result["disable_parallel_tool_use"] = True
    return result


@dataclass
class _Block:
    """One content block; `structured` is a `structured_output` tool_use holding the answer."""

    type: str
    parts: list[str] = field(default_factory=list)
    id: str | None = None
    name: str | None = None
    initial_input: Any = None
    signature: str | None = None

    @classmethod
    def opened(cls, raw: dict[str, Any], *, structured: bool) -> _Block:
        kind = raw.get("type", "")
        if structured and kind == "tool_use" and raw.get("name") == STRUCTURED_OUTPUT_TOOL:
            kind = "structured"
        return cls(
            type=kind,
            id=raw.get("id"),
            name=raw.get("name"),
            initial_input=raw.get("input"),
            signature=raw.get("signature") or None,
        )

    def arguments(self) -> str:
        text = "".join(self.parts)
        if not text and self.initial_input:
            text = json.dumps(self.initial_input)
        return text


@dataclass
class _StreamState:
    """Accumulates content blocks by index until `message_stop`."""

    model: str
    structured: bool = False
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
            self.blocks[_index(event)] = _Block.opened(block, structured=self.structured)
            if block.get("text"):
                await self._append(_index(event), block["text"], on_delta)
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "signature_delta":
                self._block(_index(event)).signature = delta.get("signature") or None
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

    def _block(self, index: int) -> _Block:
        block = self.blocks.get(index)
        if block is None:
            raise protocol_error(f"delta for content block {index} that was never started")
        return block

    async def _append(self, index: int, piece: str, on_delta: DeltaCallback | None) -> None:
        block = self._block(index)
        block.parts.append(piece)
        if on_delta is None:
            return
        if block.type == "tool_use":
            position = sum(1 for i, b in self.blocks.items() if b.type == "tool_use" and i < index)
            await on_delta(
                Delta(kind="tool_call", text=piece, tool_call_index=position, tool_call_id=block.id)
            )
        elif block.type == "thinking":
            await on_delta(Delta(kind="reasoning", text=piece))
        elif block.type in ("text", "structured"):
            await on_delta(Delta(kind="text", text=piece))

    def reply(self) -> ChatReply:
        ordered = [b for _, b in sorted(self.blocks.items())]
        return _assemble(ordered, self.stop_reason, self.usage, self.model)


def _assemble(
    blocks: list[_Block], stop: str | None, usage: dict[str, Any], model: str
) -> ChatReply:
    calls = [
        make_tool_call(position, b.id, b.name, b.arguments())
        for position, b in enumerate(b for b in blocks if b.type == "tool_use")
    ]
    content = "".join(p for b in blocks if b.type == "text" for p in b.parts) or None
    finish = _FINISH_REASONS.get(stop or "", stop)
    answers = [b for b in blocks if b.type == "structured"]
    if answers and not calls:
        content, finish = answers[-1].arguments() or "{}", "stop"
    thoughts = [b for b in blocks if b.type == "thinking"]
    return ChatReply(
        content=content,
        tool_calls=calls,
        reasoning_content="".join(p for b in thoughts for p in b.parts) or None,
        # One signature covers one block: several cannot be joined and sent back as one.
        reasoning_signature=thoughts[0].signature if len(thoughts) == 1 else None,
        usage=_usage(usage),
        finish_reason=finish,
        model=model,
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


def parse_message(data: Any, model: str, *, structured: bool = False) -> ChatReply:
    """Read a non-streaming Messages reply."""
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise protocol_error("reply has no content list")
    blocks: list[_Block] = []
    for raw in data["content"]:
        block = _Block.opened(raw, structured=structured)
        if block.type == "text":
            block.parts.append(raw.get("text", ""))
        elif block.type == "thinking":
            block.parts.append(raw.get("thinking", ""))
        elif block.type in ("tool_use", "structured"):
            block.parts.append(json.dumps(raw.get("input") or {}))
        blocks.append(block)
    return _assemble(
        blocks, data.get("stop_reason"), data.get("usage") or {}, data.get("model") or model
    )
