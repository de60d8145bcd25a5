"""A thread's kept window (activities/message_views.py), extended step after step, sends
and measures exactly what a window built afresh does: as the transcript grows, when a
message is edited or deleted, with image attachments whose recency moves, and in dual_ai."""

from __future__ import annotations

import json

import pytest

from weft.activities.context_window import Frame, KeptAs, Window, build_window
from weft.activities.images import ImageView
from weft.activities.message_views import MessageViews, WindowTails
from weft.contract.context import ContextBoundary
from weft.contract.definitions import PromptDef
from weft.contract.messages import Message, Side, ToolCall, ToolCallFunction
from weft.store.transcripts import MessageJson, message_json

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
IMAGES = ImageView(model="m", sees_images=True, recent=3, load={"/in/cat.png": PNG}.get)
BOUNDARY = ContextBoundary(
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
    created_at="2026-11-27T00:00:00Z",
)


def _frame(dual: bool) -> Frame:
    prompt = PromptDef(name="p", tool_description="p", model="m", prompt="Be brief.")
    return Frame(prompt=prompt, system="Be brief.", tools=[], dual=dual)


def _step(i: int, *, image: bool = False) -> list[Message]:
    """A user message (with an image attachment when `image`), a tool call, its result."""
    side: Side = "a" if i % 2 else "b"
    call = ToolCall(id=f"c{i}", function=ToolCallFunction(name="add", arguments='{"a": 1}'))
    return [
        Message(
            id=f"u{i}",
            thread_id="t",
            position=3 * i,
            role="user",
            content=f"step {i} ✓",
            attachments=["/in/cat.png"] if image else [],
            created_at=1,
        ),
        Message(
            id=f"a{i}",
            thread_id="t",
            position=3 * i + 1,
            role="assistant",
            content="thinking" if i % 3 else None,
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
            content='{"status":"success","result":"' + "x" * (40 + 300 * (i % 2)) + '"}',
            side=side,
            created_at=1,
        ),
    ]


def _both(
    tails: WindowTails,
    texts: list[MessageJson],
    *,
    dual: bool = False,
    boundary: ContextBoundary | None = None,
    pinned: list[Message] | None = None,
) -> tuple[Window, Window]:
    """The window kept under one key, and the same window built afresh."""
    args = (_frame(dual), boundary, pinned or [], texts)
    kept = build_window(*args, side="a", cap=60, images=IMAGES, kept_as=KeptAs(tails, "t"))
    # Each message's JSON, as the request body joins it, is that message.
    assert kept.encoded is not None
    assert [json.loads(e) for e in kept.encoded] == kept.messages
    return kept, build_window(*args, side="a", cap=60, images=IMAGES)


@pytest.mark.parametrize("dual", [False, True])
def test_a_growing_transcript_is_extended_and_sends_what_a_fresh_window_does(
    dual: bool,
) -> None:
    tails = WindowTails(MessageViews())
    texts: list[MessageJson] = []
    images_sent = []
    for i in range(8):
        texts += [message_json(m) for m in _step(i, image=i in (1, 4))]
        kept, fresh = _both(tails, texts, dual=dual)
        assert kept == fresh and kept.sizes is not None
        images_sent.append(sum(isinstance(m["content"], list) for m in kept.messages))
    # A step's image is sent while its message is among the last three, then it ages out.
    assert images_sent == [0, 1, 0, 0, 1, 0, 0, 0]
    assert kept.previews > 0  # the longer tool results are sent as previews


def test_an_edit_or_a_deletion_inside_the_kept_prefix_is_worked_out_afresh():
    tails = WindowTails(MessageViews())
    texts = [message_json(m) for i in range(4) for m in _step(i)]
    _both(tails, texts)
    edited = _step(1)[0].model_copy(update={"content": "edited"})
    texts[3] = message_json(edited)
    kept, fresh = _both(tails, texts)
    assert kept == fresh and kept.messages[4]["content"] == "edited"
    del texts[5]
    kept, fresh = _both(tails, texts)
    assert kept == fresh


def test_a_boundary_with_pinned_messages_keeps_its_window_too():
    tails = WindowTails(MessageViews())
    pinned = _step(0)[:1]
    texts = [message_json(m) for m in _step(1)[1:]]  # begins with an assistant message
    for i in range(2, 5):
        kept, fresh = _both(tails, texts, boundary=BOUNDARY, pinned=pinned)
        assert kept == fresh
        texts += [message_json(m) for m in _step(i)]
    # Pinned messages come first, so the window begins with a user message: no bridge.
    assert kept.messages[1]["content"].startswith("step 0")


def test_kept_windows_are_bounded_by_the_texts_they_hold():
    tails = WindowTails(MessageViews(), max_messages=10)
    for thread in ("t1", "t2"):
        texts = [message_json(m) for i in range(2) for m in _step(i)]
        build_window(
            _frame(False),
            None,
            [],
            texts,
            side="a",
            cap=60,
            kept_as=KeptAs(tails, thread),
        )
    assert tails.held() == 6  # t1's six texts were dropped for t2's
