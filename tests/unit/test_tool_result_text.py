"""Unit tests of what the model reads of a tool result: its text, never the stored envelope."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from weft.activities.compaction_plan import render_lines
from weft.activities.context_window import Frame, build_window, request_tokens
from weft.activities.message_views import model_view, tool_message_text, tool_result_text
from weft.activities.previews import preview_message
from weft.activities.read_output import read_output
from weft.contract.activities import ToolResult
from weft.contract.context_tokens import estimate_message_tokens, message_tokens
from weft.contract.definitions import PromptDef
from weft.contract.messages import Message, ToolCall
from weft.store import Store


def envelope(**fields: Any) -> str:
    """A tool result as weft stores it (tool_call.py and tool_runner.py write exactly this)."""
    return ToolResult(**fields).model_dump_json(exclude_none=True)


def tool_message(content: str | None, *, position: int = 2, **fields: Any) -> Message:
    return Message(
        id=f"m{position}",
        thread_id="t1",
        position=position,
        role="tool",
        content=content,
        name="weather",
        tool_call_id="call_1",
        created_at=position,
        **fields,
    )


@pytest.mark.parametrize(
    ("result", "text"),
    [
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        (None, "null"),
        ('It is "sunny"\nin Paris', 'It is "sunny"\nin Paris'),
        ("", '""'),
        ({"city": "Paris", "celsius": 21}, '{"city":"Paris","celsius":21}'),
        ({"ville": "Zürich", "note": "漢"}, '{"ville":"Zürich","note":"漢"}'),
        ([1, "two", {"three": 3}], '[1,"two",{"three":3}]'),
        ("3", "3"),  # a string is not quoted: "3" reads as 3 does (docs/tool-results.md)
    ],
    ids=[
        "int",
        "float",
        "bool",
        "none",
        "string",
        "empty-string",
        "object",
        "non-ascii",
        "list",
        "digit-string",
    ],
)
def test_a_success_is_its_result_as_text(result, text):
    """A success reads as its result: a string as it is, anything else as compact JSON."""
    assert tool_result_text(ToolResult(status="success", result=result)) == text
    assert tool_message_text(envelope(status="success", result=result)) == text


def test_an_error_reads_as_its_code_and_message_and_never_its_stack():
    """An error reads `Error (code): message`, then its error_data as JSON; no stack."""
    stored = envelope(
        status="error",
        error="city must not be empty",
        error_code="invalid_args",
        error_data={"field": "city", "got": ""},
        stack='Traceback (most recent call last):\n  File "tool.py"',
    )
    text = tool_message_text(stored)
    assert text == 'Error (invalid_args): city must not be empty\n{"field":"city","got":""}'
    assert "Traceback" not in text and "status" not in text


@pytest.mark.parametrize(
    ("fields", "text"),
    [
        ({"error": "boom"}, "Error: boom"),
        ({"error_code": "timeout"}, "Error (timeout): the tool failed"),
        (
            {"error": "prompt tool 'advisor' failed", "error_code": "model_failed", "result": {}},
            "Error (model_failed): prompt tool 'advisor' failed\n{}",
        ),
        (
            {
                "error": "max steps",
                "error_code": "max_total_steps",
                "error_data": [1],
                "result": {"toolCalls": [{"name": "weather", "status": "success"}]},
            },
            'Error (max_total_steps): max steps\n[1]\n{"toolCalls":[{"name":"weather",'
            '"status":"success"}]}',
        ),
    ],
    ids=["no-code", "no-message", "partial-result", "data-and-partial-result"],
)
def test_an_error_without_a_code_or_message_still_reads_clearly(fields, text):
    """Missing parts are left out or named; a partial result (a prompt tool's calls so far)
    follows the error data."""
    assert tool_result_text(ToolResult(status="error", **fields)) == text


def test_attachments_are_named_after_the_result_or_the_error():
    """The model is told which files a result attached, on a line after the text."""
    ok = ToolResult(status="success", result={"rows": 2}, attachments=["/r/a.csv", "/r/b.png"])
    assert tool_result_text(ok) == '{"rows":2}\n\n[attachments: /r/a.csv, /r/b.png]'
    failed = ToolResult(status="error", error="half done", error_code="x", attachments=["/r/a"])
    assert tool_result_text(failed) == "Error (x): half done\n\n[attachments: /r/a]"


@pytest.mark.parametrize("content", ["plain text", "3", '"quoted"', "{not json", '{"a": 1}'])
def test_content_that_is_not_an_envelope_is_sent_as_it_is(content):
    """A tool message weft did not write as a ToolResult keeps its content."""
    assert tool_message_text(content) == content
    message = tool_message(content)
    assert model_view(message) is message


def test_the_model_view_changes_only_a_tool_messages_content():
    """Only the content of a tool message changes; the stored message is untouched."""
    stored = envelope(status="success", result=3)
    message = tool_message(stored, tool_status="success", metadata={"stepId": "s1"})
    shown = model_view(message)
    assert shown.content == "3" and message.content == stored
    assert shown.model_dump(exclude={"content"}) == message.model_dump(exclude={"content"})
    user = message.model_copy(update={"role": "user", "tool_call_id": None})
    assert model_view(user) is user  # a user may well type JSON
    assert model_view(tool_message(None)).content is None


FRAME = Frame(
    prompt=PromptDef(name="p", tool_description="p", model="m", prompt="Be brief."),
    system="Be brief.",
    tools=[],
    dual=False,
)


def transcript(tool_content: str) -> list[Message]:
    call = ToolCall.model_validate(
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{}"}}
    )
    return [
        Message(id="m0", thread_id="t1", position=0, role="user", content="go", created_at=0),
        Message(
            id="m1", thread_id="t1", position=1, role="assistant", tool_calls=[call], created_at=1
        ),
        tool_message(tool_content, tool_status="success"),
    ]


def test_the_window_sends_the_text_and_counts_what_it_sends():
    """build_window sends the result's text; the request's estimate counts that text, and
    the workflow's estimate of the stored message is never below it."""
    stored = envelope(status="success", result={"city": "Paris", "forecast": "sunny"})
    messages = transcript(stored)
    window = build_window(FRAME, None, [], messages, side="a", cap=1_000)
    sent = window.messages[-1]
    assert sent == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": '{"city":"Paris","forecast":"sunny"}',
    }
    assert request_tokens(window.messages, []) == estimate_message_tokens(window.messages)
    as_stored = {**sent, "content": stored}
    assert estimate_message_tokens([sent]) < estimate_message_tokens([as_stored])
    assert message_tokens(messages[-1], None) >= estimate_message_tokens([sent])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path}/s.db")
    try:
        yield store
    finally:
        store.close()


async def read_page_of(store: Store, message: Message, offset: int) -> dict[str, Any]:
    """The page `read_output` returns for `message` (stored first) from `offset`."""
    store.messages.append([message])
    ref = f"weft://threads/t1/messages/{message.id}"
    result = await read_output(store, "t1", {"ref": ref, "offset": offset}, 2_000)
    assert result.status == "success", result.error
    page: dict[str, Any] = result.result
    return page


async def test_a_preview_is_cut_from_the_text_and_read_output_pages_the_same_text(store):
    """A big result's preview is the head of its text; read_output at the notice's offset
    reads on from exactly there, in the same text (not the envelope's escaped JSON)."""
    text = "".join(f'line {n:05d}: "quoted"\n' for n in range(3_000))
    stored = tool_message(envelope(status="success", result=text))
    window = build_window(FRAME, None, [], [*transcript("x")[:2], stored], side="a", cap=500)
    sent = window.messages[-1]["content"]
    assert window.previews == 1
    shown, _ = preview_message(model_view(stored), 500)
    preview = shown.metadata["preview"]
    assert sent == shown.content and preview["totalChars"] == len(text)
    assert sent.startswith(text[: preview["shownChars"]])
    assert f"this output has {len(text)} characters" in sent

    start = preview["shownChars"]
    page = await read_page_of(store, stored, start)
    assert page["offset"] == start and page["totalChars"] == len(text)
    assert page["text"] == text[start : start + page["returnedChars"]]


async def test_read_output_pages_an_error_as_its_text(store):
    """read_output of an error result pages `Error (code): …`, as the model read it."""
    stored = tool_message(envelope(status="error", error="no", error_code="x", stack="trace"))
    page = await read_page_of(store, stored, 0)
    assert page["text"] == "Error (x): no" and page["nextOffset"] is None


def test_the_summariser_reads_results_as_the_model_does():
    """Compaction renders a tool result as its text, with its status, not the envelope."""
    messages = transcript(envelope(status="success", result={"city": "Paris"}))
    messages.append(tool_message(envelope(status="error", error="no", error_code="x"), position=3))
    lines = list(render_lines(messages, cap=1_000))
    assert lines[2] == '[2] tool result (weather, success): {"city":"Paris"}'
    assert lines[3] == "[3] tool result (weather): Error (x): no"
    assert not any('"status"' in line for line in lines)
