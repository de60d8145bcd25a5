"""Unit tests of prompt tools' pure parts: result shaping, the caller's chat as a prompt tool
sees it, and the scoped window over a real SQLite store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weft.activities.scoped_window import load_scoped_window, paired_tools, without_tools
from weft.contract.context import ContextWindow
from weft.contract.messages import Message, ToolCall, ToolCallFunction
from weft.contract.prompt_tools import PromptScope, PromptToolConfig
from weft.store import Store
from weft.workflows.prompt_tools import Failure, error_text, shape_result
from weft.workflows.stop_rules import ToolOutcome


def _call(call_id: str, name: str = "weather", args: str = '{"city": "Rome"}') -> ToolCall:
    return ToolCall(id=call_id, function=ToolCallFunction(name=name, arguments=args))


def _message(position: int, role: str, content: str | None = None, **fields: Any) -> Message:
    return Message(
        id=f"m{position}",
        thread_id="t",
        position=position,
        role=role,
        content=content,
        created_at=position,
        **fields,
    )


OK = ToolOutcome(_call("c1"), succeeded=True)
FAILED = ToolOutcome(_call("c2", "explode", "not json"), succeeded=False, error="boom")


def test_every_flag_on_reports_text_calls_and_errors():
    """The default entry returns the answer and each nested call, errors included."""
    result = shape_result("advisor", PromptToolConfig(name="advisor"), [OK, FAILED], "hi", None)
    assert result.status == "success"
    assert result.result == {
        "response": "hi",
        "toolCalls": [
            {"name": "weather", "arguments": {"city": "Rome"}, "status": "success"},
            {"name": "explode", "arguments": "not json", "status": "error", "error": "boom"},
        ],
    }


def test_flags_off_leave_their_part_out():
    """Each flag switched off removes its part; errors stay visible as a status only."""
    config = PromptToolConfig(
        name="advisor", include_text_response=False, include_tool_calls=True, include_errors=False
    )
    result = shape_result("advisor", config, [FAILED], "hi", None)
    assert result.result == {
        "toolCalls": [{"name": "explode", "arguments": "not json", "status": "error"}]
    }
    bare = PromptToolConfig(name="advisor", include_text_response=False, include_tool_calls=False)
    assert shape_result("advisor", bare, [OK], "hi", None).result == {}


@pytest.mark.parametrize(("include_errors", "error"), [(True, "it broke"), (False, None)])
def test_a_failure_is_an_error_result(include_errors, error):
    """A failed prompt tool is an error result with its code; its text only under
    includeErrors, otherwise a bare statement that it failed."""
    config = PromptToolConfig(name="advisor", include_errors=include_errors)
    result = shape_result("advisor", config, [OK], None, Failure("model_failed", "it broke"))
    assert result.status == "error" and result.error_code == "model_failed"
    assert result.error == (error or "prompt tool 'advisor' failed")
    assert result.result == {
        "toolCalls": [{"name": "weather", "arguments": {"city": "Rome"}, "status": "success"}]
    }


def test_error_text_of_a_stored_result():
    """The error of a stored tool message is read back from its JSON content."""
    stored = _message(0, "tool", json.dumps({"status": "error", "error": "nope"}))
    assert error_text(stored.model_copy(update={"tool_status": "error"})) == "nope"
    assert error_text(stored.model_copy(update={"tool_status": "success"})) is None
    spilled = _message(1, "tool", "{preview…", tool_status="error")
    assert error_text(spilled) == "error (the full result is in the thread's store)"


# A caller's conversation: a past tool call with its result, then the call being answered.
CHAT = [
    _message(0, "user", "first"),
    _message(1, "assistant", None, tool_calls=[_call("past")]),
    _message(2, "tool", "{}", tool_call_id="past"),
    _message(3, "assistant", "Rome is sunny."),
    _message(4, "user", "ask"),
    _message(5, "assistant", "Let me ask.", tool_calls=[_call("now", "advisor")]),
]


def _shape(messages: list[Message]) -> list[tuple[str, str | None, list[str]]]:
    return [(m.role, m.content, [c.id for c in m.tool_calls or []]) for m in messages]


def test_without_tools_keeps_only_the_conversation():
    """includePastTools false: no tool message and no tool call remains; an assistant
    message that only called tools disappears, one with text keeps its text."""
    assert _shape(without_tools(CHAT)) == [
        ("user", "first", []),
        ("assistant", "Rome is sunny.", []),
        ("user", "ask", []),
        ("assistant", "Let me ask.", []),
    ]


def test_paired_tools_drops_the_unanswered_call():
    """includePastTools true: answered calls keep their results; the call being answered
    now (no result yet) is removed, so the transcript stays valid for providers."""
    assert _shape(paired_tools(CHAT)) == [
        ("user", "first", []),
        ("assistant", None, ["past"]),
        ("tool", "{}", []),
        ("assistant", "Rome is sunny.", []),
        ("user", "ask", []),
        ("assistant", "Let me ask.", []),
    ]
    orphan = [_message(0, "tool", "{}", tool_call_id="gone"), _message(1, "user", "x")]
    assert _shape(paired_tools(orphan)) == [("user", "x", [])]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path}/s.db")
    nested = {"parent_id": "now", "depth": 1}
    deeper = {"parent_id": "inner", "depth": 2}
    store.messages.append(
        [
            *CHAT,
            _message(6, "user", "Check Paris", **nested),
            _message(7, "assistant", None, tool_calls=[_call("inner", "deep")], **nested),
            _message(8, "user", "Go deeper", **deeper),
            _message(9, "tool", "{}", tool_call_id="inner", **nested),
        ]
    )
    yield store
    store.close()


def _scope(**fields: Any) -> PromptScope:
    return PromptScope(prompt="advisor", tool_call_id="now", depth=1, caller_position=6, **fields)


def test_scoped_window_sees_its_own_messages(store):
    """Without includeChat a prompt tool sees only messages under its own call."""
    _, _, history = load_scoped_window(store, "t", ContextWindow(), _scope())
    assert [m.position for m in history] == [6, 7, 9]


def test_scoped_window_with_the_main_chat(store):
    """includeChat at depth 1: the main transcript before the call (no nested message),
    then its own messages."""
    _, _, history = load_scoped_window(store, "t", ContextWindow(), _scope(include_chat=True))
    assert [m.position for m in history] == [0, 3, 4, 5, 6, 7, 9]


def test_main_window_excludes_nested_messages(store):
    """The main loop's window (and so compaction's) holds depth 0 only."""
    from weft.activities.context_window import load_window

    _, _, history = load_window(store, "t", ContextWindow())
    assert [m.position for m in history] == [0, 1, 2, 3, 4, 5]


def test_nested_scope_sees_its_callers_messages(store):
    """includeChat at depth 2: the caller prompt tool's messages before the call."""
    scope = PromptScope(
        prompt="deep",
        tool_call_id="inner",
        depth=2,
        caller_tool_call_id="now",
        caller_position=8,
        include_chat=True,
        include_past_tools=True,
    )
    _, _, history = load_scoped_window(store, "t", ContextWindow(), scope)
    # The caller's message 7 only called `deep` (unanswered yet): it is left out.
    assert [m.position for m in history] == [6, 8]
