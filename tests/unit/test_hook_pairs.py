"""Unit tests of repair_pairs: a filter hook's output always keeps tool calls with results."""

from __future__ import annotations

from typing import Any

from weft.activities.hooks import repair_pairs
from weft.contract.messages import Message, ToolCall, ToolCallFunction


def call(call_id: str, name: str = "weather") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}


def assistant(*calls: str, content: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [call(c) for c in calls]
    return message


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "{}"}


USER = {"role": "user", "content": "hi"}


def test_valid_transcript_is_returned_unchanged() -> None:
    """A transcript whose calls all have results comes back as the same dicts, no repairs."""
    messages = [USER, assistant("c1", "c2"), result("c1"), result("c2"), assistant(content="ok")]
    repaired, problems = repair_pairs(messages)
    assert problems == []
    assert repaired == messages
    assert all(a is b for a, b in zip(repaired, messages, strict=True))


def test_orphan_result_is_dropped() -> None:
    """A tool result whose call was filtered out is dropped, and the repair says which."""
    repaired, problems = repair_pairs([USER, result("c1"), assistant(content="done")])
    assert repaired == [USER, assistant(content="done")]
    assert problems == ["dropped the tool result for 'c1': its call is not before it"]


def test_call_without_result_is_removed_and_empty_assistant_dropped() -> None:
    """A call whose result was filtered out goes; an assistant left empty goes with it."""
    repaired, problems = repair_pairs([USER, assistant("c1"), assistant(content="later")])
    assert repaired == [USER, assistant(content="later")]
    assert len(problems) == 2
    assert "dropped the tool call 'c1'" in problems[0]
    assert "neither text nor tool calls" in problems[1]


def test_partial_calls_keep_the_answered_ones_and_the_text() -> None:
    """Of two calls only the answered one stays; the assistant's text stays too."""
    original = assistant("c1", "c2", content="checking")
    repaired, problems = repair_pairs([USER, original, result("c2")])
    assert repaired == [USER, {**assistant("c2", content="checking")}, result("c2")]
    assert problems == ["dropped the tool call 'c1': it has no result after it"]
    assert len(original["tool_calls"]) == 2  # the input is not mutated


def test_text_only_assistant_keeps_no_tool_calls_key() -> None:
    """An assistant whose every call lost its result keeps its text and no tool_calls key."""
    repaired, _ = repair_pairs([USER, assistant("c1", content="thinking")])
    assert repaired == [USER, {"role": "assistant", "content": "thinking"}]


def test_result_before_its_call_and_duplicates_are_orphans() -> None:
    """A result moved above its call, or a second result for one call, is dropped."""
    messages = [result("c1"), assistant("c1"), result("c1"), result("c1")]
    repaired, problems = repair_pairs(messages)
    assert repaired == [assistant("c1"), result("c1")]
    assert len(problems) == 2


def test_stored_message_dicts_are_repaired_too() -> None:
    """Stored messages dumped as dicts (tool_calls None when absent) repair the same way."""
    stored = [
        Message(id="u", thread_id="t", position=0, role="user", content="hi", created_at=1),
        Message(
            id="a",
            thread_id="t",
            position=1,
            role="assistant",
            tool_calls=[ToolCall(id="c1", function=ToolCallFunction(name="weather"))],
            created_at=2,
        ),
        Message(id="r", thread_id="t", position=2, role="tool", tool_call_id="c9", created_at=3),
    ]
    repaired, problems = repair_pairs([m.model_dump(mode="json") for m in stored])
    assert [m["id"] for m in repaired] == ["u"]
    assert len(problems) == 3
    assert [Message.model_validate(m).id for m in repaired] == ["u"]
