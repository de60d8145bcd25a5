"""Turn a scripted reply into wire bytes: OpenAI chunks or Anthropic events, streamed or whole.

Default usage is an estimate, not a tokenizer: input tokens are the request body's characters
divided by 4, output tokens the characters of text, reasoning, tool names and arguments
divided by 4 (each at least 1). A reply's `usage` overrides any of the three numbers.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from weft.workers.scripted_model.conversation import View
from weft.workers.scripted_model.placeholders import fill
from weft.workers.scripted_model.script import Reply, UsageSpec


@dataclass(frozen=True)
class Planned:
    """A reply made concrete for one request: ids fixed, arguments serialised, usage counted."""

    id: str
    model: str
    text: str
    reasoning: str
    tool_calls: list[tuple[str, str, str]]  # (id, name, arguments JSON)
    input_tokens: int
    output_tokens: int
    cached_tokens: int
    finish_reason: str | None
    chunk_size: int
    interleave: bool


def plan(script: str, view: View, reply: Reply, index: int, *, faulty: bool = False) -> Planned:
    """Fix ids deterministically from (script, conversation, reply index) so retries agree.

    `faulty`: this request gets the reply's `faulty_text`, if it has one, for its text.
    """
    seed = f"{script}|{view.conversation_key}|{index}"
    prefix = "toolu_" if view.protocol == "anthropic" else "call_"
    calls = []
    for position, call in enumerate(reply.tool_calls):
        args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
        args = fill(args, view)
        call_id = call.id or prefix + _hash(f"{seed}|{position}", 24)
        calls.append((call_id, call.name, args))
    text, reasoning = reply.text or "", reply.reasoning or ""
    if faulty and reply.faulty_text is not None:
        text = reply.faulty_text
    if view.forced_tool and text and not calls:
        # A forced tool is always called: the scripted answer is its input.
        calls, text = [(prefix + _hash(f"{seed}|forced", 24), view.forced_tool, text)], ""
    out_chars = len(text) + len(reasoning) + sum(len(n) + len(a) for _, n, a in calls)
    usage = reply.usage or UsageSpec()
    return Planned(
        id=_hash(seed, 24),
        model=view.model,
        text=text,
        reasoning=reasoning,
        tool_calls=calls,
        input_tokens=_pick(usage.input_tokens, max(1, view.request_chars // 4)),
        output_tokens=_pick(usage.output_tokens, max(1, out_chars // 4)),
        cached_tokens=_pick(usage.cached_tokens, 0),
        finish_reason=reply.finish_reason,
        chunk_size=reply.chunk_size,
        interleave=reply.interleave_tool_calls,
    )


def _pick(override: int | None, default: int) -> int:
    return default if override is None else override


def _hash(text: str, size: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _call_pieces(planned: Planned) -> list[tuple[int, str]]:
    """Argument fragments as (call position, piece), in order or round-robin."""
    per_call = [_pieces(args, planned.chunk_size) for _, _, args in planned.tool_calls]
    if not planned.interleave:
        return [(i, p) for i, pieces in enumerate(per_call) for p in pieces]
    out: list[tuple[int, str]] = []
    for step in range(max((len(p) for p in per_call), default=0)):
        out.extend((i, pieces[step]) for i, pieces in enumerate(per_call) if step < len(pieces))
    return out


def sse(data: Any, event: str | None = None) -> bytes:
    """One SSE event; `data` is JSON-encoded unless already a string."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


# --- OpenAI Chat Completions -------------------------------------------------------------


def _openai_finish(planned: Planned) -> str:
    return planned.finish_reason or ("tool_calls" if planned.tool_calls else "stop")


def _openai_usage(planned: Planned) -> dict[str, Any]:
    return {
        "prompt_tokens": planned.input_tokens,
        "completion_tokens": planned.output_tokens,
        "total_tokens": planned.input_tokens + planned.output_tokens,
        "prompt_tokens_details": {"cached_tokens": planned.cached_tokens},
    }


def openai_events(planned: Planned, *, include_usage: bool) -> list[bytes]:
    """The SSE events of a streamed completion, `[DONE]` last."""
    head = {
        "id": f"chatcmpl-{planned.id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": planned.model,
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse({**head, "choices": [choice]})

    events = [chunk({"role": "assistant", "content": ""})]
    events += [
        chunk({"reasoning_content": p}) for p in _pieces(planned.reasoning, planned.chunk_size)
    ]
    events += [chunk({"content": p}) for p in _pieces(planned.text, planned.chunk_size)]
    for position, (call_id, name, _) in enumerate(planned.tool_calls):
        opening = {"index": position, "id": call_id, "type": "function"}
        opening["function"] = {"name": name, "arguments": ""}
        events.append(chunk({"tool_calls": [opening]}))
    for position, piece in _call_pieces(planned):
        events.append(
            chunk({"tool_calls": [{"index": position, "function": {"arguments": piece}}]})
        )
    events.append(chunk({}, _openai_finish(planned)))
    if include_usage:
        events.append(sse({**head, "choices": [], "usage": _openai_usage(planned)}))
    events.append(sse("[DONE]"))
    return events


def openai_body(planned: Planned) -> dict[str, Any]:
    """A non-streamed `chat.completion` object."""
    message: dict[str, Any] = {"role": "assistant", "content": planned.text or None}
    if planned.reasoning:
        message["reasoning_content"] = planned.reasoning
    if planned.tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in planned.tool_calls
        ]
    return {
        "id": f"chatcmpl-{planned.id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": planned.model,
        "choices": [{"index": 0, "message": message, "finish_reason": _openai_finish(planned)}],
        "usage": _openai_usage(planned),
    }


def openai_error(status: int, message: str, code: str | None = None) -> dict[str, Any]:
    """OpenAI's error envelope."""
    kind = "invalid_request_error" if status < 500 else "server_error"
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# --- Anthropic Messages ------------------------------------------------------------------


def _anthropic_stop(planned: Planned) -> str:
    return planned.finish_reason or ("tool_use" if planned.tool_calls else "end_turn")


def _anthropic_usage(planned: Planned) -> dict[str, int]:
    # Anthropic counts cache reads apart from input_tokens.
    return {
        "input_tokens": planned.input_tokens - planned.cached_tokens,
        "cache_read_input_tokens": planned.cached_tokens,
        "cache_creation_input_tokens": 0,
        "output_tokens": planned.output_tokens,
    }


def anthropic_events(planned: Planned) -> list[bytes]:
    """The events of a streamed message, `message_stop` last."""
    usage = _anthropic_usage(planned)
    start: dict[str, Any] = {
        "id": f"msg_{planned.id}",
        "type": "message",
        "role": "assistant",
        "model": planned.model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 1},
    }
    events = [sse({"type": "message_start", "message": start}, "message_start")]
    index = 0

    def block(opening: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        events.append(
            sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
        )
        for delta in deltas:
            body = {"type": "content_block_delta", "index": index, "delta": delta}
            events.append(sse(body, "content_block_delta"))
        events.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
        index += 1

    size = planned.chunk_size
    if planned.reasoning:
        thinking = [
            {"type": "thinking_delta", "thinking": p} for p in _pieces(planned.reasoning, size)
        ]
        block(
            {"type": "thinking", "thinking": ""},
            thinking + [{"type": "signature_delta", "signature": "scripted"}],
        )
    if planned.text:
        block(
            {"type": "text", "text": ""},
            [{"type": "text_delta", "text": p} for p in _pieces(planned.text, size)],
        )
    for call_id, name, args in planned.tool_calls:
        deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(args, size)]
        block({"type": "tool_use", "id": call_id, "name": name, "input": {}}, deltas)
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": _anthropic_stop(planned), "stop_sequence": None},
        "usage": {"output_tokens": planned.output_tokens},
    }
    events.append(sse(delta, "message_delta"))
    events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


def anthropic_body(planned: Planned) -> dict[str, Any]:
    """A non-streamed Messages reply."""
    content: list[dict[str, Any]] = []
    if planned.reasoning:
        content.append({"type": "thinking", "thinking": planned.reasoning, "signature": "scripted"})
    if planned.text:
        content.append({"type": "text", "text": planned.text})
    for call_id, name, args in planned.tool_calls:
        content.append(
            {"type": "tool_use", "id": call_id, "name": name, "input": _loads_or_raw(args)}
        )
    return {
        "id": f"msg_{planned.id}",
        "type": "message",
        "role": "assistant",
        "model": planned.model,
        "content": content,
        "stop_reason": _anthropic_stop(planned),
        "stop_sequence": None,
        "usage": _anthropic_usage(planned),
    }


def _loads_or_raw(args: str) -> Any:
    try:
        return json.loads(args)
    except ValueError:
        return args  # deliberately malformed scripted arguments pass through as they are


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error envelope."""
    kind = {429: "rate_limit_error", 529: "overloaded_error", 404: "not_found_error"}.get(
        status, "invalid_request_error" if status < 500 else "api_error"
    )
    return {"type": "error", "error": {"type": kind, "message": message}}
