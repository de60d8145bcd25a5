"""TranscriptEdits: the workflow's side of inject_message, delete_message and set_env."""

from __future__ import annotations

import pytest
from unit_support import FixedContext, snapshot

from weft.contract.activities import Intent
from weft.contract.messages import ToolCall, ToolCallFunction
from weft.contract.thread import ThreadStartInput
from weft.contract.thread_env import carries_env
from weft.contract.transcript_edits import check_env_name
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.control import InvalidPayload
from weft.workflows.thread_state import ThreadMemory
from weft.workflows.transcript_edits import TranscriptEdits


def _inject(message_id: str, content: str, role: str = "user") -> Intent:
    return Intent(
        kind="inject_message",
        data={"messageId": message_id, "role": role, "content": content, "silent": False},
    )


def _call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, function=ToolCallFunction(name="weather", arguments="{}"))


def _step_with_calls(mem: ThreadMemory, *call_ids: str) -> None:
    """An assistant message of the running turn whose calls wait for their results."""
    mem.active_turn = "turn_1"
    mem.new_message(
        role="assistant",
        content=None,
        side="a",
        turn_id="turn_1",
        tool_calls=[_call(i) for i in call_ids],
    )


def _answer(mem: ThreadMemory, call_id: str) -> None:
    mem.new_message(role="tool", content="{}", side="a", turn_id="turn_1", tool_call_id=call_id)


def test_an_injected_message_takes_the_next_position_and_starts_no_turn(mem: ThreadMemory) -> None:
    """While nothing waits, the message is placed at once, to be written, with its event."""
    mem.new_message(role="user", content="hello", side=None, turn_id=None)
    TranscriptEdits(mem).inject(_inject("msg_call_1:inject1", "a note", role="system"))
    [placed] = mem.outbox_messages
    assert (placed.id, placed.position, placed.role, placed.content) == (
        "msg_call_1:inject1",
        1,
        "system",
        "a note",
    )
    assert [m.id for m in mem.index][-1] == "msg_call_1:inject1"
    assert not mem.queue and mem.active_turn is None
    [event] = [e for e in mem.outbox if e.type == "artifact.changed"]
    assert event.payload == {
        "change": "message.injected",
        "messageId": "msg_call_1:inject1",
        "role": "system",
        "position": 1,
    }


def test_an_injection_waits_for_the_steps_other_tool_results(mem: ThreadMemory) -> None:
    """Injected while a step's calls run, the message lands after their results, never
    between a call and its result."""
    _step_with_calls(mem, "c1", "c2")
    _answer(mem, "c1")
    TranscriptEdits(mem).inject(_inject("msg_x", "after both", role="assistant"))
    assert mem.outbox_messages == []
    _answer(mem, "c2")
    assert [m.role for m in mem.index] == ["assistant", "tool", "tool", "assistant"]
    [placed] = mem.outbox_messages
    assert (placed.id, placed.position, placed.turn_id, placed.side) == ("msg_x", 3, "turn_1", "a")


def test_an_injection_after_terminate_is_refused_with_a_warning(mem: ThreadMemory) -> None:
    """After terminate, inject_message is ignored and a runtime.warning says so."""
    mem.terminated_at = "2026-11-23T12:00:00Z"
    TranscriptEdits(mem).inject(_inject("msg_late", "too late"))
    assert mem.outbox_messages == [] and mem.index == []
    [warning] = [e for e in mem.outbox if e.type == "runtime.warning"]
    assert warning.payload["code"] == "after_terminate"
    assert "inject_message intent ignored" in warning.payload["message"]


def test_a_malformed_injection_names_what_is_wrong(mem: ThreadMemory) -> None:
    """A tool role or a missing id is refused (the control plane makes it a warning)."""
    edits = TranscriptEdits(mem)
    with pytest.raises(InvalidPayload, match="role"):
        edits.inject(_inject("msg_t", "x", role="tool"))
    with pytest.raises(InvalidPayload, match="messageId"):
        edits.inject(Intent(kind="inject_message", data={"role": "user", "content": "x"}))


def test_deleted_messages_leave_the_index(mem: ThreadMemory) -> None:
    """messages_deleted drops the ids from the index; positions are not reused."""
    _step_with_calls(mem, "c1")
    _answer(mem, "c1")
    kept = mem.new_message(role="user", content="keep", side=None, turn_id="turn_1")
    deleted = [m.id for m in mem.index if m.role in ("assistant", "tool")]
    edits = TranscriptEdits(mem)
    edits.forget(Intent(kind="messages_deleted", data={"ids": deleted}))
    assert [m.id for m in mem.index] == [kept.id]
    assert mem.counters.messages == 3
    with pytest.raises(InvalidPayload, match="ids"):
        edits.forget(Intent(kind="messages_deleted", data={"ids": []}))


def test_set_env_joins_the_workflows_view_and_the_carried_start_input() -> None:
    """A thread value wins over the agent's in ActiveAgent.env, and the start input that
    carries it into the next run is marked for encryption."""
    mem = ThreadMemory(
        thread_id="t1",
        start=ThreadStartInput(agent="helper"),
        context=FixedContext(),
        snapshot=snapshot(env={"REGION": {"value": "eu", "type": "text"}}),
    )
    assert not carries_env(mem.start)
    assert mem.counters.env_writes == 0
    TranscriptEdits(mem).set_env(
        Intent(
            kind="set_env",
            data={
                "env": {
                    "REGION": {"value": "us", "type": "text"},
                    "TOKEN": {"value": "s3cret", "type": "secret"},
                }
            },
        )
    )
    env = ActiveAgent(mem).env("a")
    assert (env["REGION"].value, env["REGION"].type) == ("us", "text")
    assert (env["TOKEN"].value, env["TOKEN"].type) == ("s3cret", "secret")
    # Tool calls carry the count: workers read the row again instead of a kept copy.
    assert mem.counters.env_writes == 1
    next_input = mem.start.model_copy(update={"messages": []})
    assert next_input.env["TOKEN"] == {"value": "s3cret", "type": "secret"}
    assert carries_env(next_input)


def test_a_bad_env_name_or_type_is_refused(mem: ThreadMemory) -> None:
    """Env names follow one rule; a set_env intent breaking it or naming a bad type warns."""
    edits = TranscriptEdits(mem)
    with pytest.raises(InvalidPayload, match="env name '1st'"):
        edits.set_env(Intent(kind="set_env", data={"env": {"1st": {"value": 1}}}))
    with pytest.raises(InvalidPayload, match="type"):
        edits.set_env(
            Intent(kind="set_env", data={"env": {"OK": {"value": 1, "type": "password"}}})
        )
    assert mem.start.env == {}
    # Counted all the same: the activity had written the row before it sent the intent.
    assert mem.counters.env_writes == 2
    assert check_env_name("API_TOKEN.v2-b") == "API_TOKEN.v2-b"
    for bad in ("", "$weftEncrypted", "has space", "x" * 129):
        with pytest.raises(ValueError, match="is not valid"):
            check_env_name(bad)
