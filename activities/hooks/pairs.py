"""Keeping tool calls with their results after a filter hook (`filter_messages`,
`prefilter_llm_history`) changed a transcript.

Providers refuse a tool result whose call is missing and a tool call left without a result.
A filter may drop or reorder messages freely; `repair_pairs` then drops what it orphaned,
so the transcript that reaches a provider is always valid. It works on OpenAI-shaped dicts:
`role`, `tool_calls: [{id, …}]`, `tool_call_id`, which is also how stored messages dump.
"""

from __future__ import annotations

from typing import Any


def repair_pairs(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The transcript with every tool call paired with a later result, and what was dropped.

    A tool result without an earlier call of its id (or a second result for one call) is
    dropped; a tool call without a later result is removed from its assistant message, and
    an assistant message left with neither content nor calls is dropped. Returns the
    repaired list (the same dicts where nothing changed) and one line per repair.
    """
    problems: list[str] = []
    answered = _answered_calls(messages)
    called: set[str] = set()
    kept: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in called:
                problems.append(
                    f"dropped the tool result for {call_id!r}: its call is not before it"
                )
                continue
            called.discard(call_id)  # a second result for the same call is an orphan too
            kept.append(message)
            continue
        calls = (message.get("tool_calls") or []) if role == "assistant" else []
        if not calls:
            kept.append(message)
            continue
        paired = [c for c in calls if _call_id(c) in answered.get(id(message), set())]
        for call in calls:
            if call not in paired:
                problems.append(
                    f"dropped the tool call {_call_id(call)!r}: it has no result after it"
                )
        called.update(filter(None, map(_call_id, paired)))
        if len(paired) == len(calls):
            kept.append(message)
        elif paired or _has_content(message):
            kept.append(_with_calls(message, paired))
        else:
            problems.append("dropped an assistant message left with neither text nor tool calls")
    return kept, problems


def _answered_calls(messages: list[dict[str, Any]]) -> dict[int, set[str]]:
    """For each assistant message (by identity), the ids of its calls answered later on."""
    results_after: set[str] = set()
    answered: dict[int, set[str]] = {}
    for message in reversed(messages):
        role = message.get("role")
        if role == "tool" and isinstance(message.get("tool_call_id"), str):
            results_after.add(message["tool_call_id"])
        elif role == "assistant":
            ids = set(filter(None, map(_call_id, message.get("tool_calls") or [])))
            answered[id(message)] = ids & results_after
            # A result answers the nearest call before it; an earlier call of the same id
            # (a provider never repeats one) gets no second result from it.
            results_after -= ids
    return answered


def _call_id(call: Any) -> str | None:
    return call.get("id") if isinstance(call, dict) else None


def _has_content(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return bool(content.strip()) if isinstance(content, str) else bool(content)


def _with_calls(message: dict[str, Any], calls: list[Any]) -> dict[str, Any]:
    """A copy of `message` carrying only `calls` (no `tool_calls` key when none is left)."""
    changed = {k: v for k, v in message.items() if k != "tool_calls"}
    if calls:
        changed["tool_calls"] = calls
    return changed
