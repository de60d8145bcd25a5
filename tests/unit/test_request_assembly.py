"""A model call's request assembled in one pass: the window module's `assemble` gives what
the separate steps gave, a side's frame is worked out once per key, a message is
previewed only when it may be over the cap, a hookless call builds no hook runner, and the
routing facts share one instant."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, cast

import pytest
from unit_support import snapshot

import weft.activities.context_window as context_window
import weft.activities.model_request as model_request
from weft.activities.context_window import (
    Frame,
    Framed,
    Frames,
    assemble,
    build_window,
    measure_request,
    request_of,
    selection,
    tools_for,
)
from weft.activities.hooks import HookRegistry
from weft.activities.hooks.model_hooks import ModelHooks
from weft.activities.hooks.runner import HookRunner
from weft.activities.images import ImageView
from weft.activities.message_views import (
    MessageViews,
    WindowTails,
    WirePart,
    measured,
    model_view,
    project_message,
    shown_message,
)
from weft.activities.model_request import routing_events
from weft.activities.previews import preview_message
from weft.activities.providers.transport import compact_json
from weft.contract.activities import ModelCallInput, ToolResult
from weft.contract.context import ContextBoundary, ContextWindow
from weft.contract.context_tokens import each_message_tokens, estimate_message_tokens
from weft.contract.definitions import ModelDef, PromptDef
from weft.contract.hooks import HookSpec
from weft.contract.messages import Message, ToolCall, ToolCallFunction
from weft.store.transcripts import message_json

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
MODEL = ModelDef(name="m", provider="openai", model="gpt")
PROMPT = PromptDef(name="p", tool_description="p", model="m", prompt="Be brief.")
BOUNDARY = ContextBoundary(
    boundary_id="b1",
    thread_id="t",
    kind="summary",
    reason="budget",
    first_kept_position=0,
    summarised_from_position=0,
    summarised_messages=1,
    summary="Earlier: see weft://threads/t/messages/m0.",
    tokens_before=100,
    tokens_after=10,
    created_at="2026-11-27T00:00:00Z",
)


class _Files:
    """The thread's files, as `image_view` reads them."""

    def read_file(self, thread_id: str, path: str) -> bytes:
        if path != "/in/cat.png":
            raise OSError(path)
        return PNG


class _Store:
    files = _Files()


def _transcript() -> list[Message]:
    result = ToolResult(status="success", result={"sum": 3})
    call = ToolCall(id="c1", function=ToolCallFunction(name="add", arguments='{"a": 1}'))
    return [
        Message(
            id="a0", thread_id="t", position=0, role="assistant", content="Hello ✓", created_at=1
        ),
        Message(
            id="u1",
            thread_id="t",
            position=1,
            role="user",
            content="Look.",
            attachments=["/in/cat.png"],
            created_at=1,
        ),
        Message(
            id="a1", thread_id="t", position=2, role="assistant", tool_calls=[call], created_at=1
        ),
        Message(
            id="r1",
            thread_id="t",
            position=3,
            role="tool",
            tool_call_id="c1",
            content=result.model_dump_json(),
            created_at=1,
        ),
        Message(
            id="u2", thread_id="t", position=4, role="user", content="é" * 40_000, created_at=1
        ),
    ]


@pytest.mark.parametrize("boundary", [None, BOUNDARY])
@pytest.mark.parametrize("kept", [False, True])
def test_one_call_assembles_what_the_separate_steps_built(
    boundary: ContextBoundary | None, kept: bool
) -> None:
    frame = Frame(PROMPT, "Be brief, façade.", [{"name": "add", "parameters": {}}], False)
    messages = _transcript()
    history = [message_json(m) for m in messages[1:]]
    window = ContextWindow()
    views = MessageViews()
    framed = Framed(frame, WirePart.of({"role": "system", "content": frame.system}))
    # Kept: the second call finds the first one's sums and projects nothing again.
    tails = WindowTails(views) if kept else None

    def once() -> Any:
        return assemble(
            framed,
            boundary,
            messages[:1],
            history,
            model=MODEL,
            window=window,
            side="a",
            files=cast(Any, _Store()),
            thread_id="t",
            views=views,
            tails=tails,
        )

    first, again = once(), once()
    cap = context_window.preview_cap(MODEL, window)
    images = ImageView(
        model="m",
        sees_images=True,
        recent=PROMPT.recent_image_threshold,
        load=lambda path: PNG if path == "/in/cat.png" else None,
    )
    built = build_window(frame, boundary, messages[:1], history, side="a", cap=cap, images=images)
    tools = tools_for(frame, built, boundary)
    tokens, size = measure_request(built, tools)
    for assembled in (first, again):
        assert assembled.window.messages == built.messages
        assert assembled.window.encoded == built.encoded
        assert assembled.window.previews == built.previews == 1
        assert assembled.tools == tools
        assert (assembled.report.request_tokens, assembled.report.request_bytes) == (tokens, size)
        assert assembled.selection == selection(boundary, messages[:1], history)
        budget = context_window.limits_of(MODEL, window).prompt_budget
        assert assembled.report == request_of(frame, built, boundary, MODEL, budget)[1]
    # The attachment went as an image part, the long message as a preview (with the
    # reader offered for it).
    assert any(isinstance(m["content"], list) for m in first.window.messages)
    assert first.tools[-1]["name"] == "read_output"


def test_a_kept_frame_is_not_worked_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    real = context_window.frame

    def counting(*args: Any, **kwargs: Any) -> Frame:
        made.append("frame")
        return real(*args, **kwargs)

    monkeypatch.setattr(context_window, "frame", counting)
    frames = Frames(max_frames=1)
    snap = snapshot()
    first = frames.get("t", "k1", snap, None, None, "a")
    assert frames.get("t", "k1", snap, None, None, "a") is first
    assert len(made) == 1
    assert first.head == WirePart.of({"role": "system", "content": "Hi."})
    # No key (the env may have changed unseen): worked out each time, never kept.
    frames.get("t", None, snap, None, None, "a")
    frames.get("t", None, snap, None, None, "a")
    assert len(made) == 3
    frames.get("t", "k2", snap, None, None, "a")  # drops k1: one frame kept at most
    frames.get("t", "k1", snap, None, None, "a")
    assert len(made) == 5


@pytest.mark.parametrize("text", ["a" * 256, "a" * 257, "é" * 600, "😀" * 256, "😀" * 257, ""])
def test_a_message_is_previewed_exactly_when_the_full_path_previews_it(text: str) -> None:
    cap = 256
    arguments = '{"x": "' + text + '"}'
    call = ToolCall(id="c", function=ToolCallFunction(name="f", arguments=arguments))
    for message in (
        Message(id="m", thread_id="t", position=0, role="user", content=text, created_at=1),
        Message(id="m", thread_id="t", position=0, role="assistant", content=text, created_at=1),
        Message(
            id="m", thread_id="t", position=0, role="assistant", tool_calls=[call], created_at=1
        ),
    ):
        full, previewed = preview_message(model_view(message), cap)
        expected = project_message(full, side="a", dual=False)
        assert shown_message(message, cap, side="a", dual=False) == (expected, previewed)


def test_measured_parts_are_each_message_alone() -> None:
    entries: list[dict[str, Any] | None] = [
        {"role": "user", "content": "héllo ✓"},
        None,
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "function": {}}]},
        {"role": "user", "content": [{"type": "text", "text": "x"}, {"type": "image_url"}]},
    ]
    parts = measured([(e, i == 0) for i, e in enumerate(entries)])
    for entry, part in zip(entries, parts, strict=True):
        if entry is None:
            assert part == WirePart(None, False, 0, b"", 0)
            continue
        assert part.tokens == estimate_message_tokens([entry])
        assert part.encoded == compact_json(entry)
        assert part.json_bytes == len(compact_json(entry))
    assert parts[0].previewed
    seen = [e for e in entries if e is not None]
    assert each_message_tokens(seen) == [estimate_message_tokens([e]) for e in seen]


class _NoRunners(HookRegistry):
    def runner(self, *args: Any, **kwargs: Any) -> HookRunner:
        raise AssertionError("no hook is in scope: no runner is needed")


def _call() -> ModelCallInput:
    return ModelCallInput(
        thread_id="t",
        snapshot_id="snap_1",
        side="a",
        model="m",
        turn_id="turn",
        step_id="step",
        step=1,
        assistant_message_id="am",
        assistant_position=1,
    )


async def test_a_call_without_hooks_in_scope_builds_no_runner() -> None:
    store = cast(Any, None)
    registry = _NoRunners(store)
    message = Message(
        id="am", thread_id="t", position=1, role="assistant", content="ok", created_at=1
    )
    event: Callable[[str, str, dict[str, Any]], Any] = lambda *a: None  # noqa: E731
    hooks = ModelHooks(registry, store, snapshot(), _call(), make_event=event, attempt_id="a1")
    assert hooks.idle
    assert await hooks.new_messages([message], []) == ([message], [], False)
    assert await hooks.reply(message) == (message, None)
    await hooks.created([message])
    # A snapshot whose agent hooks something in scope is not idle.
    spec = HookSpec(id="shout", hook="after_create_message")
    hooked = snapshot(hooks=["shout"]).model_copy(update={"hooks": {"shout": spec}})
    assert not ModelHooks(
        HookRegistry(store), store, hooked, _call(), make_event=event, attempt_id="a1"
    ).idle


def test_the_routing_facts_share_one_instant(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = itertools.count()
    monkeypatch.setattr(model_request, "now_iso", lambda: f"2026-11-27T00:00:0{next(ticks)}Z")
    snap = snapshot()
    snap = snap.model_copy(
        update={
            "models": {
                "m": MODEL.model_copy(update={"fallbacks": ["b"]}),
                "b": ModelDef(name="b", provider="openai", model="gpt-b"),
            }
        }
    )
    ids = model_request.attempt_ids(_call(), 1)
    events = routing_events(_call(), snap, ids)
    assert [e.type for e in events] == ["routing.candidates.resolved", "routing.decided"]
    assert len({e.timestamp for e in events}) == 1
