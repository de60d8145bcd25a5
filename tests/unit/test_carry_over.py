"""Continue-as-new hand-over: the memory a run carries, and the memory the next run builds."""

from __future__ import annotations

from unit_support import FixedContext, memory, snapshot

from weft.contract.actions import ActionResolution
from weft.contract.carry_parts import CARRIED_RESOLVED
from weft.contract.messages import QueuedMessage
from weft.contract.thread import ThreadCarryOver, TurnCursor
from weft.workflows.continuation import CARRIED_INDEX, carry_over, restore
from weft.workflows.queue import ThreadQueue


def test_carried_memory_restores_the_same_thread() -> None:
    """Everything survives carry_over then restore, the events not yet stored included."""
    mem = memory(sessionId="s1")
    ThreadQueue(mem).add_message(QueuedMessage(role="user", content="next"))
    mem.new_message(role="user", content="hi", side=None, turn_id="turn_1")
    mem.count_step("a")
    mem.status, mem.active_agent = "running", None
    mem.stop.turn_ended("stop_on_response")
    mem.actions.session_allowed_tools.add("weather")
    mem.subagents.immediate_done.add("p")
    mem.warn("malformed_signal", "queue_message", "bad")
    turn = TurnCursor(side="a", turn_id="turn_1", side_steps=1)

    carried = carry_over(mem, snapshot(), turn)
    restored = restore("t1", mem.start, carried, FixedContext())

    assert carried.counters.runs == mem.counters.runs + 1
    assert [e.queue_id for e in restored.queue] == [e.queue_id for e in mem.queue]
    assert restored.queue[0].message == mem.queue[0].message
    assert restored.index == mem.index
    assert (restored.active_turn, restored.active_side) == ("turn_1", "a")
    assert restored.status == "running" and restored.stop_reason == "stop_on_response"
    assert restored.actions.session_allowed_tools == {"weather"}
    assert restored.subagents.immediate_done == {"p"}
    assert (restored.warnings, restored.incidents) == (1, mem.incidents)
    assert restored.counters.steps == 1 and restored.counters.messages == 1
    # Events a signal added during the run's last write ride along; the next run stores them.
    assert [e.event_id for e in restored.outbox] == [e.event_id for e in mem.outbox]
    assert [e.type for e in restored.outbox] == ["queue.changed", "runtime.warning"]
    assert restored.outbox_messages == mem.outbox_messages


def test_only_a_recent_window_is_carried() -> None:
    """The index keeps its newest entries (the rest is in the store), resolved actions too."""
    mem = memory()
    for i in range(CARRIED_INDEX + 20):
        mem.new_message(role="user", content=str(i), side=None, turn_id=None)
    for i in range(CARRIED_RESOLVED + 3):
        mem.actions.resolved[f"act_{i}"] = ActionResolution(
            action_id=f"act_{i}",
            kind="ask_human",
            decision="answer",
            decided_by="human",
            resolved_at="now",
        )
    carried = carry_over(mem, snapshot(), None)
    assert len(carried.index) == CARRIED_INDEX
    assert carried.index_base == 20 and carried.index[0].position == 20
    sent = ThreadCarryOver.model_validate_json(carried.model_dump_json()).actions.resolved
    assert len(sent) == CARRIED_RESOLVED
    assert list(sent)[-1] == f"act_{CARRIED_RESOLVED + 2}"
    assert restore("t1", mem.start, carried, FixedContext()).active_turn is None
