"""Where compaction cuts: never between a tool call and its result, pins kept, tails fit."""

from __future__ import annotations

from typing import Any

from weft.activities.compaction_plan import chunk_lines, plan_cut, render_lines
from weft.contract.context_tokens import estimate_tokens, message_tokens
from weft.contract.messages import Message, ToolCall

CAP = 1_000


def msg(position: int, role: str, text: str = "x" * 400, **fields: Any) -> Message:
    return Message(
        id=f"m{position}",
        thread_id="t1",
        position=position,
        role=role,
        content=text,
        created_at=position,
        **fields,
    )


def call(position: int, call_id: str) -> Message:
    tool_call = ToolCall.model_validate(
        {"id": call_id, "type": "function", "function": {"name": "note", "arguments": "{}"}}
    )
    return msg(position, "assistant", "", tool_calls=[tool_call])


def result(position: int, call_id: str) -> Message:
    return msg(position, "tool", "y" * 400, tool_call_id=call_id, name="note")


def turns(count: int) -> list[Message]:
    """`count` turns of user, assistant-with-tool-call, tool result, assistant answer."""
    out: list[Message] = []
    for turn in range(count):
        base = turn * 4
        out += [
            msg(base, "user"),
            call(base + 1, f"c{turn}"),
            result(base + 2, f"c{turn}"),
            msg(base + 3, "assistant"),
        ]
    return out


def test_everything_within_the_tail_is_not_compacted():
    assert plan_cut(turns(2), tail_tokens=10_000, cap=CAP) is None


def test_the_tail_starts_at_a_user_message_and_fits():
    messages = turns(10)
    plan = plan_cut(messages, tail_tokens=1_000, cap=CAP)
    assert plan is not None
    assert plan.tail[0].role == "user"
    assert sum(message_tokens(m, CAP) for m in plan.tail) <= 1_000
    assert plan.summarised + plan.tail == messages
    assert plan.first_kept_position == plan.tail[0].position


def test_a_long_turn_is_cut_at_a_step_never_between_call_and_result():
    messages = [msg(0, "user")]
    for step in range(20):
        messages += [call(1 + 2 * step, f"c{step}"), result(2 + 2 * step, f"c{step}")]
    plan = plan_cut(messages, tail_tokens=500, cap=CAP)
    assert plan is not None
    assert plan.tail[0].role == "assistant" and plan.tail[0].tool_calls
    kept_calls = {c.id for m in plan.tail for c in m.tool_calls or []}
    kept_results = {m.tool_call_id for m in plan.tail if m.role == "tool"}
    assert kept_calls == kept_results


def test_a_step_bigger_than_the_tail_budget_is_kept_whole():
    messages = [msg(0, "user"), call(1, "c"), result(2, "c")]
    plan = plan_cut(messages, tail_tokens=10, cap=CAP)
    assert plan is not None and [m.position for m in plan.tail] == [1, 2]


def test_pinned_messages_are_kept_not_summarised():
    messages = turns(10)
    messages[0] = msg(0, "user", "remember: the code is 1234", metadata={"pinned": True})
    plan = plan_cut(messages, tail_tokens=1_000, cap=CAP)
    assert plan is not None
    assert [m.id for m in plan.pinned] == ["m0"]
    assert "m0" not in {m.id for m in plan.summarised}


def test_a_pinned_tool_call_cannot_stand_alone_and_is_summarised():
    messages = turns(10)
    messages[1] = messages[1].model_copy(update={"metadata": {"pinned": True}})
    plan = plan_cut(messages, tail_tokens=1_000, cap=CAP)
    assert plan is not None and plan.pinned == []


def test_rendering_previews_big_outputs_and_chunks_fit():
    messages = [
        msg(0, "user", "hello"),
        result(1, "c").model_copy(update={"content": "z" * 50_000}),
    ]
    lines = list(render_lines(messages, cap=200))
    assert lines[0] == "[0] user: hello"
    assert lines[1].startswith("[1] tool result (note): ") and estimate_tokens(lines[1]) < 400
    chunks = list(chunk_lines(iter([f"line {n} " + "w" * 100 for n in range(100)]), 300))
    assert len(chunks) > 1
    assert all(sum(estimate_tokens(line) + 8 for line in c) <= 300 for c in chunks)
    assert [line for c in chunks for line in c][0].startswith("line 0 ")


def test_a_forced_compaction_keeps_only_the_latest_turn():
    messages = turns(3)
    plan = plan_cut(messages, tail_tokens=10_000, cap=CAP, forced=True)
    assert plan is not None and plan.first_kept_position == 8
    assert plan_cut(turns(1), tail_tokens=10_000, cap=CAP, forced=True) is None
