"""Windows built from a worker's kept parts (MessageViews.part) send and measure exactly
what a window built afresh does, step after step."""

from __future__ import annotations

from dataclasses import replace

import pytest

from weft.activities.context_window import (
    Frame,
    build_window,
    measure_request,
    request_bytes,
    request_tokens,
)
from weft.activities.message_views import MessageViews
from weft.contract.context import ContextBoundary
from weft.contract.definitions import PromptDef
from weft.contract.messages import Message, ToolCall, ToolCallFunction
from weft.store.transcripts import message_json

TOOLS = [{"name": "add", "description": "Adds ✓", "parameters": {"type": "object"}}]


def _frame(dual: bool) -> Frame:
    prompt = PromptDef(name="p", tool_description="p", model="m", prompt="Be brief.")
    return Frame(prompt=prompt, system="Be brief, façade.", tools=TOOLS, dual=dual)


def _transcript(steps: int) -> list[Message]:
    messages = []
    for i in range(steps):
        side = "a" if i % 2 else "b"
        call = ToolCall(id=f"c{i}", function=ToolCallFunction(name="add", arguments='{"a": 1}'))
        messages += [
            Message(
                id=f"u{i}",
                thread_id="t",
                position=3 * i,
                role="user",
                content=f"héllo {i}",
                created_at=1,
            ),
            Message(
                id=f"a{i}",
                thread_id="t",
                position=3 * i + 1,
                role="assistant",
                content="thinking ✓" if i % 3 else None,
                tool_calls=[call],
                side=side,
                created_at=1,
            ),
            Message(
                id=f"r{i}",
                thread_id="t",
                position=3 * i + 2,
                role="tool",
                tool_call_id=f"c{i}",
                content='{"status":"success","result":"' + "x" * 900 + '"}',
                side=side,
                created_at=1,
            ),
        ]
    return messages


@pytest.mark.parametrize("dual", [False, True])
@pytest.mark.parametrize("with_boundary", [False, True])
def test_kept_parts_send_and_measure_what_a_fresh_window_does(
    dual: bool, with_boundary: bool
) -> None:
    boundary = (
        ContextBoundary(
            boundary_id="b1",
            thread_id="t",
            kind="summary",
            reason="budget",
            first_kept_position=1,
            summarised_from_position=0,
            summarised_messages=1,
            summary="Earlier: sums.",
            tokens_before=100,
            tokens_after=10,
            created_at="2026-11-26T00:00:00Z",
        )
        if with_boundary
        else None
    )
    views = MessageViews()
    messages = _transcript(12)[1:]  # begins with an assistant message: a bridge is added
    fresh = build_window(_frame(dual), boundary, [], messages, side="a", cap=100)
    for _ in range(2):  # the second build comes from the kept parts
        kept = build_window(_frame(dual), boundary, [], messages, side="a", cap=100, views=views)
        assert kept.messages == fresh.messages
        assert kept.previews == fresh.previews > 0
        for tools in (TOOLS, []):
            assert measure_request(kept, tools) == (
                request_tokens(fresh.messages, tools),
                request_bytes(fresh.messages, tools),
            )


def test_a_window_changed_by_a_hook_is_measured_afresh():
    views = MessageViews()
    kept = build_window(_frame(False), None, [], _transcript(3), side="a", cap=100, views=views)
    changed = kept.messages[:2]
    filtered = replace(kept, messages=changed, sizes=None)
    assert measure_request(filtered, TOOLS) == (
        request_tokens(changed, TOOLS),
        request_bytes(changed, TOOLS),
    )


def test_a_window_of_kept_texts_is_the_window_of_their_messages():
    """The transcript cache hands out each message's JSON text: the window built from the
    texts (parsed only where no part is kept) is the one built from the messages."""
    messages = _transcript(6)
    texts = [message_json(m) for m in messages]
    views = MessageViews()
    fresh = build_window(_frame(True), None, [], messages, side="b", cap=100)
    for _ in range(2):
        kept = build_window(_frame(True), None, [], texts, side="b", cap=100, views=views)
        assert kept == fresh


def test_an_edited_message_is_a_new_part():
    """Parts are kept under the message's text, so an edit (same id) is never served stale."""
    views = MessageViews()
    original = _transcript(1)
    edited = [original[0].model_copy(update={"content": "edited"}), *original[1:]]
    first = build_window(_frame(False), None, [], original, side="a", cap=100, views=views)
    second = build_window(_frame(False), None, [], edited, side="a", cap=100, views=views)
    assert first.messages[1]["content"] == "héllo 0"
    assert second.messages[1]["content"] == "edited"
    assert second.messages[2:] == first.messages[2:]
