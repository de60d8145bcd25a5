"""Continue-as-new: when a run has grown enough, and what it carries into the next run.

A run continues as new only at a safe point (idle, or between two steps of a turn), after
every handler has finished, with the event outbox flushed and nothing waiting on a human.
Everything the thread remembers moves into `ThreadCarryOver`; content stays in the store.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from temporalio import workflow

from contract.thread import (
    CarriedQueueEntry,
    ThreadCarryOver,
    ThreadOptions,
    TurnCursor,
)
from workflows.thread_state import QueueEntry

if TYPE_CHECKING:
    from workflows.thread_base import ThreadBase

# The patch that introduced continue-as-new: histories recorded before it never continue.
PATCH_ID = "continue-as-new-v1"
# The message index carried into the next run: the `messages` query pages through this
# recent window; older metadata (and all content) is read from the store.
CARRIED_INDEX = 500
# Resolved actions remembered across runs, so a late answer is told it came too late.
CARRIED_RESOLVED = 100


def history_is_long(options: ThreadOptions) -> bool:
    """Whether this run's history is past the thresholds (or Temporal suggests to continue)."""
    info = workflow.info()
    return (
        info.is_continue_as_new_suggested()
        or info.get_current_history_length() >= options.continue_as_new_events
        or info.get_current_history_size() >= options.continue_as_new_bytes
    )


def carry_over(thread: ThreadBase, turn: TurnCursor | None) -> ThreadCarryOver:
    """The thread's whole memory, as the next run's start input carries it."""
    mem = thread._require_mem()
    index = mem.index[-CARRIED_INDEX:]
    resolved = list(mem.resolved_actions.values())[-CARRIED_RESOLVED:]
    return ThreadCarryOver(
        snapshot=thread._require_snapshot(),
        status=thread._status,
        queue=[
            CarriedQueueEntry(
                queue_id=e.queue_id,
                turn_id=e.turn_id,
                enqueued_at=e.enqueued_at,
                message=e.message,
                tool=e.tool,
            )
            for e in mem.queue
        ],
        index=index,
        index_base=mem.index_base + len(mem.index) - len(index),
        counters=mem.counters.model_copy(update={"runs": mem.counters.runs + 1}),
        usage=mem.usage,
        cost_unknown=mem.cost_unknown,
        warnings=mem.warnings,
        incidents=list(mem.incidents),
        pending_actions=list(mem.pending_actions.values()),
        resolved_actions=resolved,
        session_allowed_tools=sorted(mem.session_allowed_tools),
        children=list(thread._children.values()),
        active_agent=thread._active_agent,
        immediate_done=sorted(thread._immediate_done),
        deferred_spawns=list(thread._deferred.values()),
        stop_reason=thread._stop_reason,
        last_outcome=thread._last_outcome,
        terminated_at=thread._terminated_at,
        terminate_reason=thread._terminate_reason,
        turn=turn,
    )


def restore(thread: ThreadBase, carried: ThreadCarryOver) -> None:
    """Put a carried memory back in place (synchronously, before any handler runs)."""
    mem = thread._require_mem()
    mem.queue = deque(
        QueueEntry(e.queue_id, e.turn_id, e.enqueued_at, message=e.message, tool=e.tool)
        for e in carried.queue
    )
    mem.index = list(carried.index)
    mem.index_base = carried.index_base
    mem.counters = carried.counters.model_copy()
    mem.usage = carried.usage.model_copy()
    mem.cost_unknown = carried.cost_unknown
    mem.warnings = carried.warnings
    mem.incidents = list(carried.incidents)
    mem.pending_actions = {a.action_id: a for a in carried.pending_actions}
    mem.resolved_actions = {r.action_id: r for r in carried.resolved_actions}
    mem.session_allowed_tools = set(carried.session_allowed_tools)
    thread._snapshot = carried.snapshot
    thread._children = {e.reference: e for e in carried.children}
    thread._active_agent = carried.active_agent
    thread._immediate_done = set(carried.immediate_done)
    thread._deferred = {
        str(d.scoped_env_request): d for d in carried.deferred_spawns if d.scoped_env_request
    }
    thread._status = carried.status
    thread._stop_reason = carried.stop_reason
    thread._last_outcome = carried.last_outcome
    thread._terminated_at = carried.terminated_at
    thread._terminate_reason = carried.terminate_reason
    if carried.turn is not None:
        thread._active_turn, thread._active_side = carried.turn.turn_id, carried.turn.side
