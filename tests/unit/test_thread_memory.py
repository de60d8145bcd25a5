"""ThreadMemory: ids, events, the outbox, message positions, incidents, usage."""

from __future__ import annotations

from unit_support import FixedContext, memory

from weft.contract.messages import MessageMeta
from weft.contract.subagents import RegistryEntry
from weft.contract.thread import UsageTotals
from weft.workflows.thread_state import MAX_INCIDENTS, ThreadMemory


def test_emit_stamps_ids_time_and_thread(mem: ThreadMemory) -> None:
    """An emitted event carries a new id, workflow time, the thread and the given ids."""
    event = mem.emit("turn.started", {"side": "a"}, turn_id="turn_x")
    assert event.event_id == "evt_0001"
    assert event.timestamp == "2026-11-23T12:00:00Z"
    assert (event.thread_id, event.turn_id, event.payload) == ("t1", "turn_x", {"side": "a"})
    assert mem.outbox == [event]


def test_returned_outbox_goes_before_newer_events(mem: ThreadMemory) -> None:
    """Events of a failed activity are kept ahead of events produced meanwhile."""
    first = mem.emit("a")
    taken = mem.take_outbox()
    later = mem.emit("b")
    mem.return_outbox(taken)
    assert [e.type for e in mem.outbox] == ["a", "b"]
    assert mem.outbox == [first, later]


def test_messages_take_positions_in_order_and_are_indexed(mem: ThreadMemory) -> None:
    """new_message and reserve_position share one position counter; the index has no content."""
    first = mem.new_message(role="user", content="hello", side=None, turn_id="turn_1")
    reserved = mem.reserve_position()
    second = mem.new_message(role="assistant", content="hi", side="a", turn_id="turn_1")
    assert (first.position, reserved, second.position) == (0, 1, 2)
    assert mem.counters.messages == 3
    assert [m.position for m in mem.index] == [0, 2]
    assert all(isinstance(m, MessageMeta) and not hasattr(m, "content") for m in mem.index)


def test_index_message_moves_the_counter_past_a_later_position(mem: ThreadMemory) -> None:
    """A message an activity wrote at a reserved position keeps the counter ahead of it."""
    position = mem.reserve_position()
    message = mem.new_message(role="user", content="x", side=None, turn_id=None)
    message = message.model_copy(update={"position": position + 5})
    mem.index_message(message)
    assert mem.counters.messages == position + 6


def test_incidents_keep_only_the_most_recent(mem: ThreadMemory) -> None:
    """The incident list is capped; the newest survive, with their ids."""
    for i in range(MAX_INCIDENTS + 5):
        mem.incident("code", f"message {i}", turn_id="turn_1", step_id=None)
    assert len(mem.incidents) == MAX_INCIDENTS
    assert mem.incidents[-1] == {
        "code": "code",
        "message": f"message {MAX_INCIDENTS + 4}",
        "at": "2026-11-23T12:00:00Z",
        "turn_id": "turn_1",
    }


def test_warn_counts_logs_and_emits_a_runtime_warning() -> None:
    """A refused input is a counter, an incident, a log line and a runtime.warning event."""
    mem = memory()
    mem.warn("malformed_signal", "queue_message", "content: field required")
    assert mem.warnings == 1
    assert mem.incidents[0]["signal"] == "queue_message"
    (event,) = mem.outbox
    assert event.type == "runtime.warning"
    assert event.payload == {
        "code": "malformed_signal",
        "signal": "queue_message",
        "message": "content: field required",
        "incident": mem.incidents[0],  # stated, for a read model rebuilt from events
    }
    assert isinstance(mem.context, FixedContext)
    assert mem.context.warnings == ["malformed_signal (queue_message): content: field required"]


def test_total_usage_adds_what_children_reported(mem: ThreadMemory) -> None:
    """Usage rolls up from children; a child without a price leaves the cost as it was."""
    mem.usage = UsageTotals(input_tokens=10, output_tokens=5, cost_usd=0.5)
    for ref, usage in (
        ("c1", {"inputTokens": 3, "outputTokens": 2, "costUsd": 0.25}),
        ("c2", {"inputTokens": 1, "cachedTokens": 7}),
        ("c3", {}),
    ):
        mem.subagents.children[ref] = RegistryEntry(
            reference=ref,
            name=ref,
            resumable=False,
            blocking=True,
            status="running",
            created_at="now",
            agent="kid",
            tool="kid",
            parent_communication="implicit",
            usage=usage,
        )
    total = mem.total_usage()
    assert (total.input_tokens, total.output_tokens, total.cached_tokens) == (14, 7, 7)
    assert total.cost_usd == 0.75
    assert mem.usage.input_tokens == 10  # the thread's own usage is unchanged


def test_counters_per_side(mem: ThreadMemory) -> None:
    """Steps count per thread, session and side; turns per side and in all."""
    mem.count_step("a")
    mem.count_step("b")
    mem.count_step("b")
    mem.count_turn("b")
    counters = mem.counters
    assert (counters.steps, counters.session_steps) == (3, 3)
    assert (counters.side_a_steps, counters.side_b_steps) == (1, 2)
    assert (counters.side_a_turns, counters.side_b_turns, counters.turns) == (0, 1, 1)


def test_thread_row_and_parent() -> None:
    """The store row names the agent, status, session, user and parent of the thread."""
    mem = memory(
        sessionId="s1",
        userId="u1",
        parent={"threadId": "boss", "name": "kid", "tool": "kid"},
    )
    row = mem.thread_row()
    assert row["agent"] == "helper"
    assert row["status"] == "preparing"
    assert (row["session_id"], row["user_id"], row["parent_thread_id"]) == ("s1", "u1", "boss")
    assert mem.parent_id == "boss"
