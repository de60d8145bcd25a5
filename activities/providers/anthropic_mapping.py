"""OpenAI-shaped chat messages to Anthropic Messages content blocks (the request side)."""

from __future__ import annotations

import json
from typing import Any

from temporalio.exceptions import ApplicationError

from weft.activities.providers.errors import excerpt


def map_messages(
    messages: list[dict[str, Any]], *, thinking: bool = False
) -> tuple[str, list[dict[str, Any]]]:
    """Split out the system text and map OpenAI messages to Anthropic content blocks.

    Tool results become `tool_result` blocks in a user message; adjacent messages of one role
    are merged, which joins consecutive tool results (and a user note after them) into one
    user message as Anthropic's strict alternation requires. With `thinking`, an assistant
    message's signed reasoning goes back as its first block, as Anthropic requires of a
    tool-use turn while thinking is enabled.
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
            blocks = _thinking_block(message) if thinking else []
            blocks += _text_blocks(message.get("content")) + [
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


def _thinking_block(message: dict[str, Any]) -> list[dict[str, Any]]:
    signed = message.get("thinking") or {}
    if not signed.get("signature"):
        return []  # unsigned reasoning (another provider's) cannot be sent back
    return [
        {"type": "thinking", "thinking": signed.get("text") or "", "signature": signed["signature"]}
    ]
