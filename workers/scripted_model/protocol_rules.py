"""Request rules the real providers enforce and weft's adapters must respect.

A request that breaks one gets the provider's HTTP 400, so a test against the scripted
server fails the way it would against the provider. Anthropic, with `thinking` enabled:
the budget is at least 1,024 tokens and below `max_tokens`; tool use may not be forced;
the last assistant message, when it used tools, starts with its (signed) thinking block.
"""

from __future__ import annotations

from typing import Any

_THINKING_BLOCKS = ("thinking", "redacted_thinking")


def request_problem(protocol: str, body: dict[str, Any]) -> str | None:
    """The provider's 400 message for `body`, or None when the provider would accept it."""
    if protocol != "anthropic":
        return None
    thinking = body.get("thinking") or {}
    if thinking.get("type") != "enabled":
        return None
    return _anthropic_thinking_problem(body, thinking)


def _anthropic_thinking_problem(body: dict[str, Any], thinking: dict[str, Any]) -> str | None:
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] <= budget:
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    if (body.get("tool_choice") or {}).get("type") in ("any", "tool"):
        return "Thinking may not be enabled when tool_choice forces tool use."
    messages = body.get("messages") or []
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"),
        None,
    )
    if last is None:
        return None
    content = messages[last].get("content")
    blocks = content if isinstance(content, list) else []
    if not any(b.get("type") == "tool_use" for b in blocks):
        return None
    first = blocks[0] if blocks else {}
    if first.get("type") not in _THINKING_BLOCKS:
        return (
            f"messages.{last}.content.0.type: Expected `thinking` or `redacted_thinking`, but "
            f"found `{first.get('type')}`. When `thinking` is enabled, a final `assistant` "
            "message must start with a thinking block (preceeding the lastmost set of "
            "`tool_use` and `tool_result` blocks)."
        )
    if first.get("type") == "thinking" and not first.get("signature"):
        return f"messages.{last}.content.0.thinking.signature: Field required"
    return None
