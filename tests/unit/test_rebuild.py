"""The fold of contract/rebuild.py on hand-written event logs, without a worker."""

from __future__ import annotations

from typing import Any

import pytest

from weft.contract.events import Event
from weft.contract.rebuild import MAX_INCIDENTS, thread_read_from_events

THREAD = "thread-1"
COUNTERS = {"steps": 2, "sessionSteps": 2, "turns": 1, "messages": 4, "sideASteps": 2}
CONTEXT = {"promptBudget": 1000, "lastRequestTokens": 10, "compactions": 0}
INFO = {"name": "helper", "title": "Helper", "sideLabels": {"a": "you"}}


def log(*events: tuple[str, dict[str, Any], dict[str, Any]]) -> list[Event]:
    """Events of one thread numbered in order: (type, payload, envelope ids)."""
    return [
        Event(
            type=kind,
            event_id=f"evt_{n}",
            timestamp=f"2026-01-01T00:00:{n:02d}Z",
            sequence=n,
            thread_id=THREAD,
            session_id="session-thread-1",
            payload=payload,
            **ids,
        )
        for n, (kind, payload, ids) in enumerate(events, start=1)
    ]


def a_turn(outcome: str = "hi") -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """A thread that ran one answered turn and went idle."""
    turn = {"turn_id": "turn_1"}
    usage = {"inputTokens": 7, "outputTokens": 3, "cachedTokens": 1}
    return [
        ("thread.started", {"agent": "helper", "parentThreadId": None}, {}),
        ("turn.started", {"side": "a", "agentInfo": INFO, "permissions": {"policy": "none"}}, turn),
        ("model.completed", {"usage": usage, "costUsd": 0.5}, turn),
        ("turn.completed", {"side": "a", "stopReason": "stop_on_response", "outcome": outcome}, turn),
        ("thread.updated", {"status": "idle", "stopReason": "stop_on_response",
                            "counters": COUNTERS, "context": CONTEXT}, {}),
    ]  # fmt: skip


def test_an_idle_thread_is_read_from_its_turn_events() -> None:
    """One answered turn: status, outcome, usage, counters, context and agent are its events'."""
    read = thread_read_from_events(log(*a_turn("Sunny.")))
    assert (read.thread_id, read.agent, read.session_id) == (THREAD, "helper", "session-thread-1")
    assert (read.status, read.active_turn_id, read.active_side) == ("waiting_input", None, None)
    assert (read.last_outcome, read.stop_reason) == ("Sunny.", "stop_on_response")
    assert read.usage.model_dump(by_alias=True) == {
        "inputTokens": 7,
        "outputTokens": 3,
        "cachedTokens": 1,
        "costUsd": 0.5,
    }
    assert read.counters.steps == 2 and read.counters.messages == 4 and read.counters.runs == 1
    assert read.context == CONTEXT
    assert read.agent_info is not None and read.agent_info.side_labels == {"a": "you"}
    assert read.permission_state == {"policy": "none", "sessionAllowedTools": []}
    assert read.updated_at == "2026-01-01T00:00:05Z"  # the last event's time


def test_a_running_turn_and_its_queue_are_shown_until_it_ends() -> None:
    """Mid-turn the turn is active and the queue is the last `queue.changed`'s."""
    item = {"queueId": "q_2", "kind": "message", "turnId": "turn_1", "enqueuedAt": "t"}
    events = log(
        *a_turn()[:3],
        ("queue.changed", {"action": "enqueued", "queue": [item]}, {}),
    )
    read = thread_read_from_events(events)
    assert (read.status, read.active_turn_id, read.active_side) == ("running", "turn_1", "a")
    assert [q.queue_id for q in read.queue] == ["q_2"]


def test_actions_approvals_and_warnings_come_from_their_events() -> None:
    """A pending action is listed (and the thread waits) until resolved; a session approval
    is remembered; only refused inputs count as warnings; each stated incident is kept."""
    required = {
        "actionType": "tool_permission",
        "toolName": "weather",
        "prompt": "Run it?",
        "decisions": ["approve", "deny"],
        "args": {"city": "Oslo"},
        "requestedAt": "t0",
    }
    ids = {"action_id": "act_1", "tool_call_id": "call_1", "turn_id": "turn_1"}
    scoped = {"actionId": "vr_1", "kind": "scoped_variables", "missing": ["KEY"]}
    incident = {"code": "malformed_signal", "message": "bad", "at": "t", "signal": "x"}
    configured = {"policy": "configured", "mode": "default", "rules": {"agent": 1, "prompt": 0}}
    base = a_turn()[:3]
    base[1] = ("turn.started", {"side": "a", "permissions": configured}, {"turn_id": "turn_1"})
    pending = log(
        *base,
        ("action.required", required, ids),
        ("action.required", scoped, {"tool_call_id": "call_2"}),
        ("runtime.warning", {"code": "malformed_signal", "signal": "x", "incident": incident}, {}),
        ("runtime.warning", {"code": "model_failed", "message": "m"}, {}),
    )  # fmt: skip
    read = thread_read_from_events(pending)
    assert read.pending_actions == [
        {"actionId": "act_1", "kind": "tool_permission", "toolCallId": "call_1",
         "toolName": "weather", "turnId": "turn_1", "prompt": "Run it?", "args": {"city": "Oslo"},
         "decisions": ["approve", "deny"], "requestedAt": "t0", "timeoutSeconds": None,
         "expiresAt": None, "onTimeout": None}
    ]  # fmt: skip
    assert read.status == "waiting_permission" and read.warnings == 1
    assert read.incidents == [incident]
    assert read.permission_state["pendingApprovals"] == 1
    resolution = {"toolName": "weather", "decision": "approve", "scope": "session"}
    read = thread_read_from_events([*pending, *log(("action.resolved", resolution, ids))])
    assert read.pending_actions == [] and read.permission_state["pendingApprovals"] == 0
    assert read.permission_state["sessionAllowedTools"] == ["weather"]
    assert read.status == "running"


def test_incidents_keep_the_most_recent_only() -> None:
    """Like the workflow, the read keeps the last MAX_INCIDENTS incidents."""
    events = log(
        *[
            ("tool.failed", {"incident": {"code": "tool_x", "message": str(n), "at": "t"}}, {})
            for n in range(MAX_INCIDENTS + 3)
        ]
    )
    incidents = thread_read_from_events(events).incidents
    assert [i["message"] for i in incidents] == [str(n) for n in range(3, MAX_INCIDENTS + 3)]


def test_children_effects_and_runs_are_folded() -> None:
    """The last entry of each subagent, pending effects soonest first, and the run count
    a continue-as-new states; a child's usage adds to the thread's."""
    entry = {"reference": "c1", "status": "completed", "usage": {"inputTokens": 5, "costUsd": 1.0}}
    late = {"id": "e2", "name": "remind", "scheduledAt": "2026-01-02T00:00:00Z"}
    soon = {"id": "e1", "name": "remind", "scheduledAt": "2026-01-01T00:00:00Z"}
    ran = {"id": "e3", "name": "remind", "scheduledAt": "2026-01-01T00:00:00Z"}
    events = log(
        *a_turn(),
        ("subagent.spawned", {"childThreadId": "c1", "entry": {**entry, "status": "running"}}, {}),
        ("subagent.completed", {"childThreadId": "c1", "entry": entry}, {}),
        *[("job.created", {"effect": e}, {}) for e in (late, soon, ran)],
        ("job.started", {"effect": ran}, {}),
        ("thread.updated", {"continuedAsNew": {"run": 3, "previousRun": 2}}, {}),
    )
    read = thread_read_from_events(events)
    assert read.children == [entry]
    assert read.usage.input_tokens == 12 and read.usage.cost_usd == 1.5
    assert [e["id"] for e in read.scheduled_effects] == ["e1", "e2"]
    assert all(e["due"] is False for e in read.scheduled_effects)
    assert read.counters.runs == 3


def test_a_terminated_thread_and_a_price_less_model() -> None:
    """Terminate's `thread.updated` closes the read; a reply without a price is `unknown`."""
    events = log(
        *a_turn(),
        ("model.completed", {"usage": {"inputTokens": 1}, "costUsd": None}, {}),
        ("turn.failed", {"reason": "aborted_by_user", "outcome": "stopped"}, {}),
        ("thread.updated", {"status": "cancelled", "terminatedAt": "2026-01-01T00:01:00Z",
                            "counters": {**COUNTERS, "turns": 2}, "context": CONTEXT}, {}),
    )  # fmt: skip
    read = thread_read_from_events(events)
    assert (read.status, read.terminated_at) == ("cancelled", "2026-01-01T00:01:00Z")
    assert (read.stop_reason, read.last_outcome) == ("aborted_by_user", "stopped")
    assert read.counters.turns == 2 and read.unknown == ["usage.costUsd"]


def test_the_stored_read_models_are_not_read() -> None:
    """A `snapshot.updated` is the live model's copy, not a fact: the fold ignores it."""
    snapshot = {"kind": "thread_read", "threadRead": {"agent": "someone else", "warnings": 9}}
    read = thread_read_from_events(log(*a_turn(), ("snapshot.updated", snapshot, {})))
    assert read.agent == "helper" and read.warnings == 0


def test_no_events_is_refused() -> None:
    """A read model needs the thread's events: none is a clear error naming them."""
    with pytest.raises(ValueError, match="events"):
        thread_read_from_events([])
