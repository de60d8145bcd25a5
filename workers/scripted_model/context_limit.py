"""A script's `context_limit`: a request's size by the runtime's own estimator
(`contract.context_tokens`), and each provider's "prompt too long" reply.
"""

from __future__ import annotations

import json
from typing import Any

from weft.contract.context_tokens import estimate_message_tokens


def request_tokens(protocol: str, body: dict[str, Any]) -> int:
    """Estimated prompt tokens of a request body (its messages and, for Anthropic, `system`)."""
    messages = body.get("messages")
    messages = messages if isinstance(messages, list) else []
    if protocol == "openai":
        return estimate_message_tokens(m for m in messages if isinstance(m, dict))
    return estimate_message_tokens(anthropic_as_chat(body.get("system"), messages))


def anthropic_as_chat(system: Any, messages: list[Any]) -> list[dict[str, Any]]:
    """Anthropic messages in OpenAI chat shape, so one estimator serves both protocols.

    `system` becomes a system message, `tool_use` blocks tool calls (arguments as JSON), and
    each `tool_result` block its own tool message, as the OpenAI request would have them.
    """
    out: list[dict[str, Any]] = []
    if system:
        out.append(
            {"role": "system", "content": system if isinstance(system, str) else _blocks(system)}
        )
    for message in messages:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks = [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []
        for block in blocks:
            if block.get("type") == "tool_result":
                result = block.get("content")
                text = result if isinstance(result, str) else _blocks(result)
                out.append(
                    {"role": "tool", "tool_call_id": block.get("tool_use_id"), "content": text}
                )
        rest = [b for b in blocks if b.get("type") not in ("tool_result", "tool_use")]
        calls = [
            {
                "id": b.get("id"),
                "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input"))},
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        if rest or calls:
            entry: dict[str, Any] = {"role": message.get("role"), "content": rest}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
    return out


def _blocks(blocks: Any) -> list[dict[str, Any]]:
    return [b for b in blocks if isinstance(b, dict)] if isinstance(blocks, list) else []


def overflow_body(protocol: str, limit: int, tokens: int) -> dict[str, Any]:
    """The body the real provider sends with HTTP 400 when a prompt is over its window."""
    if protocol == "openai":
        message = (
            f"This model's maximum context length is {limit} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
        return {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    message = f"prompt is too long: {tokens} tokens > {limit} maximum"
    return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
