"""`thread_read` rebuilt from a thread's event log alone (seed 001: "events can be replayed
into a read model").

`thread_read_from_events` folds the stored events, in sequence order, into the same
`ThreadRead` the live `thread_read` query answers. It reads facts only, never the
`snapshot.updated` read models the log also carries: where the live model shows what no
event states, the event that should state it is incomplete (tests/test_rebuild_read_model.py
compares the two over every recorded scenario).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from weft.contract.events import Event
from weft.contract.thread import AgentInfo, Counters, QueuedItem, ThreadRead
from weft.contract.turns import UsageTotals

# As `ThreadMemory.incident` keeps them (workflows/thread_state.py: MAX_INCIDENTS).
MAX_INCIDENTS = 20


class _Fold:
    """The read model as the events seen so far state it."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.agent = ""
        self.session_id: str | None = None
        self.status = "preparing"
        self.active_turn: str | None = None
        self.active_side: str | None = None
        self.queue: list[dict[str, Any]] = []
        self.pending: dict[str, dict[str, Any]] = {}
        self.children: dict[str, dict[str, Any]] = {}
        self.counters = Counters()
        self.usage = UsageTotals()
        self.cost_unknown = False
        self.last_outcome: str | None = None
        self.stop_reason: str | None = None
        self.terminated_at: str | None = None
        self.warnings = 0
        self.parent_id: str | None = None
        self.incidents: list[dict[str, Any]] = []
        self.permission_state: dict[str, Any] = {}
        self.session_allowed: set[str] = set()
        self.context: dict[str, Any] | None = None
        self.agent_info: AgentInfo | None = None
        self.budget: dict[str, Any] | None = None
        self.effects: dict[str, dict[str, Any]] = {}
        self.updated_at: str | None = None

    # ---- the handlers, by event type ---------------------------------------------------

    def thread_started(self, event: Event, p: dict[str, Any]) -> None:
        self.agent = p.get("agent") or self.agent
        self.parent_id = p.get("parentThreadId")

    def session_updated(self, event: Event, p: dict[str, Any]) -> None:
        if p.get("threadStatus"):
            self.status = p["threadStatus"]

    def turn_started(self, event: Event, p: dict[str, Any]) -> None:
        self.active_turn, self.active_side = event.turn_id, p.get("side")
        self.status = "running"
        if "agentInfo" in p:  # the definitions in force for this turn
            self.agent_info = AgentInfo.model_validate(p["agentInfo"])
            self.agent = self.agent_info.name
        if "permissions" in p:
            self.permission_state = dict(p["permissions"])

    def turn_completed(self, event: Event, p: dict[str, Any]) -> None:
        self.stop_reason = p.get("stopReason", self.stop_reason)
        self.last_outcome = p.get("outcome")

    def turn_failed(self, event: Event, p: dict[str, Any]) -> None:
        self.stop_reason = p.get("reason", self.stop_reason)
        self.last_outcome = p.get("outcome", self.last_outcome)

    def thread_updated(self, event: Event, p: dict[str, Any]) -> None:
        if "counters" in p:
            self.counters = Counters.model_validate(p["counters"])
        if "context" in p:
            self.context = p["context"]
        if "lastOutcome" in p:
            self.last_outcome = p["lastOutcome"]
        if p.get("status") == "idle":
            self.stop_reason = p.get("stopReason")
            self.status = "waiting_input"
            self.active_turn = self.active_side = None
        elif p.get("status") == "cancelled":
            self.terminated_at = p.get("terminatedAt")
            self.status = "cancelled"
        elif "handoff" in p:
            self.agent = p["handoff"].get("to") or self.agent

    def queue_changed(self, event: Event, p: dict[str, Any]) -> None:
        self.queue = list(p.get("queue") or [])

    def action_required(self, event: Event, p: dict[str, Any]) -> None:
        if "action" in p:
            self.pending[p["action"]["actionId"]] = p["action"]

    def action_resolved(self, event: Event, p: dict[str, Any]) -> None:
        self.pending.pop(event.action_id or "", None)
        if p.get("scope") == "session" and p.get("decision") == "approve" and p.get("toolName"):
            self.session_allowed.add(p["toolName"])

    def subagent(self, event: Event, p: dict[str, Any]) -> None:
        entry = p.get("entry")
        if isinstance(entry, dict) and p.get("childThreadId"):
            self.children[p["childThreadId"]] = entry

    def model_completed(self, event: Event, p: dict[str, Any]) -> None:
        # Answered calls only, as `add_usage` counts them (a failed attempt's estimate,
        # `cost.recorded`, is the budget's, not the thread's usage).
        usage = p.get("usage") or {}
        self.usage.input_tokens += usage.get("inputTokens") or 0
        self.usage.output_tokens += usage.get("outputTokens") or 0
        self.usage.cached_tokens += usage.get("cachedTokens") or 0
        if p.get("costUsd") is not None:
            self.usage.cost_usd = (self.usage.cost_usd or 0.0) + p["costUsd"]
        elif usage.get("inputTokens") or usage.get("outputTokens"):
            self.cost_unknown = True

    def runtime_warning(self, event: Event, p: dict[str, Any]) -> None:
        if "signal" in p:  # a refused input (`ThreadMemory.warn`): counted
            self.warnings += 1

    def incident(self, event: Event, p: dict[str, Any]) -> None:
        incident = p.get("incident")
        if isinstance(incident, dict):
            self.incidents.append(incident)
            del self.incidents[:-MAX_INCIDENTS]

    def job(self, event: Event, p: dict[str, Any]) -> None:
        effect = p.get("effect") if isinstance(p.get("effect"), dict) else {}
        if event.type == "job.created":
            self.effects[effect["id"]] = effect
        else:  # started (it runs now), or cancelled: no longer pending
            self.effects.pop(effect.get("id"), None)

    def budget_fact(self, event: Event, p: dict[str, Any]) -> None:
        if isinstance(p.get("budget"), dict):
            self.budget = p["budget"]

    # ---- the result ------------------------------------------------------------------

    def read(self) -> ThreadRead:
        permission = dict(self.permission_state)
        if permission:
            permission["sessionAllowedTools"] = sorted(self.session_allowed)
            if permission.get("policy") == "configured":
                permission["pendingApprovals"] = sum(
                    1 for a in self.pending.values() if a.get("kind") == "tool_permission"
                )
        return ThreadRead(
            thread_id=self.thread_id,
            agent=self.agent,
            session_id=self.session_id,
            status=self.status,  # type: ignore[arg-type]
            active_turn_id=self.active_turn,
            active_side=self.active_side,  # type: ignore[arg-type]
            queue=[QueuedItem.model_validate(item) for item in self.queue],
            pending_actions=list(self.pending.values()),
            children=list(self.children.values()),
            counters=self.counters,
            usage=_with_children(self.usage, self.children.values()),
            last_outcome=self.last_outcome,
            stop_reason=self.stop_reason,  # type: ignore[arg-type]
            terminated_at=self.terminated_at,
            warnings=self.warnings,
            parent_thread_id=self.parent_id,
            incidents=list(self.incidents),
            permission_state=permission,
            unknown=["usage.costUsd"] if self.cost_unknown else [],
            updated_at=self.updated_at,
            context=self.context,
            agent_info=self.agent_info,
            budget=self.budget,  # type: ignore[arg-type]
            # A due effect (its timer fired while a step runs) shows as not due: no event
            # states the timer; it runs, with `job.started`, once the step ends.
            scheduled_effects=[
                {**e, "due": False}
                for e in sorted(self.effects.values(), key=lambda e: (e["scheduledAt"], e["id"]))
            ],
        )


_Handler = Callable[[_Fold, Event, dict[str, Any]], None]

_HANDLERS: dict[str, _Handler] = {
    "thread.started": _Fold.thread_started,
    "session.updated": _Fold.session_updated,
    "turn.started": _Fold.turn_started,
    "turn.completed": _Fold.turn_completed,
    "turn.failed": _Fold.turn_failed,
    "thread.updated": _Fold.thread_updated,
    "queue.changed": _Fold.queue_changed,
    "action.required": _Fold.action_required,
    "action.resolved": _Fold.action_resolved,
    "model.completed": _Fold.model_completed,
    "runtime.warning": _Fold.runtime_warning,
    "limit.changed": _Fold.budget_fact,
    **{
        f"subagent.{kind}": _Fold.subagent
        for kind in ("spawned", "status", "input", "completed", "failed", "closed")
    },
    **{f"job.{kind}": _Fold.job for kind in ("created", "started", "cancelled")},
}


def thread_read_from_events(events: Sequence[Event]) -> ThreadRead:
    """The `thread_read` the events state, folded in order; raises ValueError on no events."""
    if not events:
        raise ValueError("events: a thread's read model needs at least one event")
    fold = _Fold(events[0].thread_id)
    for event in events:
        fold.session_id = event.session_id or fold.session_id
        fold.updated_at = event.timestamp
        payload = event.payload if isinstance(event.payload, dict) else {}
        handler = _HANDLERS.get(event.type)
        if handler is not None:
            handler(fold, event, payload)
        if isinstance(payload.get("incident"), dict):
            fold.incident(event, payload)
    return fold.read()


def _with_children(own: UsageTotals, children: Any) -> UsageTotals:
    """This thread's usage plus what its children reported (theirs include their own)."""
    total = own.model_copy()
    for entry in children:
        child = UsageTotals.model_validate(entry.get("usage") or {})
        total.input_tokens += child.input_tokens
        total.output_tokens += child.output_tokens
        total.cached_tokens += child.cached_tokens
        if child.cost_usd is not None:
            total.cost_usd = (total.cost_usd or 0.0) + child.cost_usd
    return total
