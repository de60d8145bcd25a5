"""ThreadQueue: FIFO entries and the edits clients make, each recorded as queue.changed."""

from __future__ import annotations

import pytest

from weft.contract.messages import QueuedMessage, QueuedTool
from weft.workflows.queue import ThreadQueue, UnknownQueuedTurn
from weft.workflows.thread_state import ThreadMemory


def _texts(queue: ThreadQueue) -> list[str]:
    return [item["queueId"] for item in queue.snapshot()]


def test_entries_leave_in_arrival_order(mem: ThreadMemory) -> None:
    """A message and a tool queue as turns of their own and pop oldest first."""
    queue = ThreadQueue(mem)
    first = queue.add_message(QueuedMessage(role="user", content="one"))
    second = queue.add_tool(QueuedTool(name="weather", args={"city": "Oslo"}))
    assert len(queue) == 2 and queue.head() is first
    assert first.turn_id != second.turn_id
    assert queue.pop() is first and queue.pop() is second
    assert not queue


def test_every_change_is_an_event_with_the_queue_after_it(mem: ThreadMemory) -> None:
    """enqueued, promoted and removed events each carry the queue as it then is."""
    queue = ThreadQueue(mem)
    a = queue.add_message(QueuedMessage(role="user", content="a"))
    b = queue.add_message(QueuedMessage(role="user", content="b"))
    queue.promote(b.queue_id)
    assert _texts(queue) == [b.queue_id, a.queue_id]
    queue.remove(a.queue_id)
    events = [e.payload for e in mem.outbox]
    assert [p["action"] for p in events] == ["enqueued", "enqueued", "promoted", "removed"]
    assert [i["queueId"] for i in events[2]["queue"]] == [b.queue_id, a.queue_id]
    assert [i["queueId"] for i in events[3]["queue"]] == [b.queue_id]
    assert events[1]["queue"][1]["kind"] == "message"


def test_unknown_queue_id_names_what_is_queued(mem: ThreadMemory) -> None:
    """Removing an entry that is not queued raises, listing the ids that are."""
    queue = ThreadQueue(mem)
    entry = queue.add_message(QueuedMessage(role="user", content="a"))
    with pytest.raises(
        UnknownQueuedTurn, match=f"no queued turn 'q_nope'; queued: {entry.queue_id}"
    ):
        queue.remove("q_nope")
    queue.pop()
    with pytest.raises(UnknownQueuedTurn, match="queued: none"):
        queue.promote(entry.queue_id)


def test_reject_says_why_the_thread_is_busy(mem: ThreadMemory) -> None:
    """A rejected submit_turn names the status, active turn and queue length."""
    queue = ThreadQueue(mem)
    queue.add_message(QueuedMessage(role="user", content="a"))
    mem.status, mem.active_turn = "running", "turn_9"
    result = queue.reject()
    assert result.status == "rejected"
    assert result.reason == "policy 'reject': the thread is busy (running, turn turn_9, 1 queued)"
    assert mem.outbox[-1].payload["action"] == "rejected"
    assert len(queue) == 1  # nothing was queued


def test_interrupt_and_drain_are_recorded(mem: ThreadMemory) -> None:
    """An interrupt names the interrupted turn; a drain records the queue left behind."""
    queue = ThreadQueue(mem)
    mem.active_turn = "turn_1"
    entry = queue.add_message(QueuedMessage(role="user", content="stop that"))
    queue.interrupted(entry)
    queue.pop()
    queue.drained(turn_id="turn_1", step_id="step_1")
    interrupt, drained = mem.outbox[-2], mem.outbox[-1]
    assert interrupt.payload["interruptedTurnId"] == "turn_1"
    assert drained.payload == {"action": "drained", "queue": []}
    assert (drained.turn_id, drained.step_id) == ("turn_1", "step_1")
