"""OpenAI-compatible Chat Completions adapter: streaming SSE, tool-call deltas and usage."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

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
from weft.activities.providers.transport import (
    Body,
    compact_json,
    loads,
    open_stream,
    post_json,
)


class OpenAIChatProvider:
    """Calls `{base_url}/chat/completions`; the base URL includes `/v1` as OpenAI's does."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        max_tokens_field: str = "max_completion_tokens",
    ) -> None:
        # The client is injected so the worker owns pooling and timeouts; httpx never retries.
        self._client = client
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
        # OpenAI's reasoning models reject `max_tokens`; older compatible servers want it.
        self._max_tokens_field = max_tokens_field

    async def complete(
        self, request: ChatRequest, *, on_delta: DeltaCallback | None = None
    ) -> ChatReply:
        """Run one completion, streamed unless the request (or `provider_options`) says not."""
        body = self.build_body(request)
        if body.get("stream") is False:
            body.pop("stream_options", None)
            data = await post_json(
                self._client, self._url, body=joined_body(body, request), headers=self._headers
            )
            reply = parse_completion(data, request.model)
            await emit_whole(reply, on_delta)
            return reply
        state = _StreamState(model=request.model)
        async with open_stream(
            self._client, self._url, body=joined_body(body, request), headers=self._headers
        ) as response:
            # Read to the end even after [DONE]: leaving the body unread makes httpx close
            # the connection instead of returning it to the keep-alive pool.
            async for event in iter_sse(response.aiter_lines()):
                if event.data == "[DONE]":
                    state.done = True
                elif not state.done:
                    await state.feed(loads(event.data, what="stream chunk"), on_delta)
        if not state.done:
            raise protocol_error("stream ended without [DONE] (truncated)")
        return state.reply()

    def build_body(self, request: ChatRequest) -> dict[str, Any]:
        """The JSON body for `request`; `provider_options` are merged last."""
        body: dict[str, Any] = {
            "model": request.model,
            "messages": [_wire_message(m) for m in request.messages],
            "stream": request.stream,
        }
        if request.stream:
            body["stream_options"] = {"include_usage": True}
        tools = [
            {
                "type": "function",
                "function": {
                    "name": t["name"],
                    "description": t.get("description", ""),
                    "parameters": t.get("parameters") or {"type": "object", "properties": {}},
                },
            }
            for t in request.tools
        ] + request.provider_tools
        if tools:
            body["tools"] = tools
            # OpenAI rejects tool_choice and parallel_tool_calls when no tools are sent.
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
            if request.tool_choice is not None:
                body["tool_choice"] = request.tool_choice
        if request.response_schema is not None:
            # Strict: the schema was checked at start-up to be strict-compatible.
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": STRUCTURED_OUTPUT_TOOL,
                    "schema": request.response_schema,
                    "strict": True,
                },
            }
        if request.reasoning is not None:
            body["reasoning_effort"] = request.reasoning.openai_effort()
        if request.max_output_tokens is not None:
            body[self._max_tokens_field] = request.max_output_tokens
        body.update(request.provider_options)
        return body


def joined_body(body: dict[str, Any], request: ChatRequest) -> Body:
    """`body`, encoded by joining the request's own encoded messages when it sends them
    unchanged: the same JSON httpx would make, without encoding the whole transcript
    again (1.4 ms at 800 messages). Otherwise `body` itself, for httpx to encode."""
    encoded = request.encoded_messages
    if (
        encoded is None
        or len(encoded) != len(request.messages)
        or "messages" in request.provider_options  # the options replaced them
        or any("thinking" in m for m in request.messages)  # _wire_message changes these
    ):
        return body
    rest = compact_json({k: v for k, v in body.items() if k != "messages"})
    head = b'{"messages":[' + b",".join(encoded) + b"]"
    return head + (b"," + rest[1:] if len(rest) > 2 else b"}")


def _wire_message(message: dict[str, Any]) -> dict[str, Any]:
    # Anthropic's signed thinking means nothing here, and OpenAI refuses unknown fields.
    # Copied only then: the window's entries are shared and never mutated, and copying
    # all of them cost 0.7 ms a request at 800 messages.
    if "thinking" not in message:
        return message
    return {k: v for k, v in message.items() if k != "thinking"}


@dataclass
class _PendingCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """Accumulates chunks; tool calls are keyed by their `index`, which may interleave."""

    model: str
    done: bool = False
    text: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    summaries: list[str] = field(default_factory=list)
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)

    async def feed(self, chunk: Any, on_delta: DeltaCallback | None) -> None:
        if not isinstance(chunk, dict):
            raise protocol_error(f"stream chunk is not a JSON object: {chunk!r:.120}")
        if "error" in chunk:  # some compatible servers report failures mid-stream
            raise _stream_error(chunk["error"])
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = parse_usage(chunk["usage"])
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
            delta = choice.get("delta") or {}
            # DeepSeek and vLLM call it reasoning_content, OpenRouter and Ollama reasoning.
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            for kind, piece, sink in (
                ("reasoning", thought, self.reasoning),
                ("text", delta.get("content"), self.text),
            ):
                if isinstance(piece, str) and piece:
                    sink.append(piece)
                    if on_delta:
                        await on_delta(Delta(kind=kind, text=piece))
            self.summaries += reasoning_summaries(delta)
            for part in delta.get("tool_calls") or []:
                await self._feed_call(part, on_delta)

    async def _feed_call(self, part: dict[str, Any], on_delta: DeltaCallback | None) -> None:
        index = part.get("index")
        if not isinstance(index, int):
            raise protocol_error(f"tool call delta without an integer index: {part!r:.120}")
        call = self.calls.setdefault(index, _PendingCall())
        call.id = part.get("id") or call.id
        function = part.get("function") or {}
        call.name = function.get("name") or call.name
        piece = function.get("arguments")
        if isinstance(piece, str) and piece:
            call.arguments.append(piece)
            if on_delta:
                await on_delta(
                    Delta(kind="tool_call", text=piece, tool_call_index=index, tool_call_id=call.id)
                )

    def reply(self) -> ChatReply:
        calls = [
            make_tool_call(i, c.id, c.name, "".join(c.arguments))
            for i, c in sorted(self.calls.items())
        ]
        return ChatReply(
            content="".join(self.text) or None,
            tool_calls=calls,
            reasoning_content="".join(self.reasoning) or None,
            reasoning_summary="".join(self.summaries) or None,
            usage=self.usage,
            finish_reason=self.finish_reason,
            model=self.model,
        )


def parse_completion(data: Any, model: str) -> ChatReply:
    """Read a non-streaming `chat.completion` object."""
    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise protocol_error("reply has no choices[0].message") from None
    calls = [
        make_tool_call(
            i,
            call.get("id"),
            (call.get("function") or {}).get("name"),
            (call.get("function") or {}).get("arguments") or "",
        )
        for i, call in enumerate(message.get("tool_calls") or [])
    ]
    return ChatReply(
        content=message.get("content") or None,
        tool_calls=calls,
        reasoning_content=message.get("reasoning_content") or message.get("reasoning") or None,
        reasoning_summary="".join(reasoning_summaries(message)) or None,
        usage=parse_usage(data.get("usage") or {}),
        finish_reason=choice.get("finish_reason"),
        model=data.get("model") or model,
    )


def reasoning_summaries(message: dict[str, Any]) -> list[str]:
    """The summary texts in a message's (or a delta's) `reasoning_details` (OpenRouter's
    normalised reasoning: `{type: "reasoning.summary", summary}` beside text and
    encrypted entries, which are not summaries)."""
    details = message.get("reasoning_details")
    return [
        d["summary"]
        for d in (details if isinstance(details, list) else [])
        if isinstance(d, dict)
        and d.get("type") == "reasoning.summary"
        and isinstance(d.get("summary"), str)
    ]


def parse_usage(raw: dict[str, Any]) -> Usage:
    """OpenAI usage: `prompt_tokens` already includes the cached ones."""
    details = raw.get("prompt_tokens_details") or {}
    return Usage(
        input_tokens=raw.get("prompt_tokens") or 0,
        output_tokens=raw.get("completion_tokens") or 0,
        cached_tokens=details.get("cached_tokens") or 0,
    )


def _stream_error(error: Any) -> Exception:
    code = error.get("code") if isinstance(error, dict) else None
    status = code if isinstance(code, int) and 400 <= code <= 599 else 500
    return classify_http_error(status, {}, json.dumps(error))
