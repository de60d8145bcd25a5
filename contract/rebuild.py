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

from weft.contract.actions import PendingAction
from weft.contract.events import Event
from weft.contract.forks import ForkLink
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
        self.forked_from: ForkLink | None = None
        self.successor: str | None = None
        self.definitions_digest: str | None = None

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
        self.definitions_digest = p.get("definitionsDigest", self.definitions_digest)

    def policy_changed(self, event: Event, p: dict[str, Any]) -> None:
        if p.get("policy") == "definitions":  # the thread moved to newer definitions
            self.definitions_digest = p.get("definitionsDigest", self.definitions_digest)

    def turn_completed(self, event: Event, p: dict[str, Any]) -> None:
        self.stop_reason = p.get("stopReason", self.stop_reason)
        self.last_outcome = p.get("outcome")

    def turn_failed(self, event: Event, p: dict[str, Any]) -> None:
        self.stop_reason = p.get("reason", self.stop_reason)
        self.last_outcome = p.get("outcome", self.last_outcome)

    def session_facts(self, p: dict[str, Any]) -> None:
        """Counters and context, stated where the thread stops: idle, terminated, waiting
        on a person (workflows/read_facts.py)."""
        if "counters" in p:
            self.counters = Counters.model_validate(p["counters"])
        if "context" in p:
            self.context = p["context"]
        if "budget" in p:
            self.budget = p["budget"]

    def thread_updated(self, event: Event, p: dict[str, Any]) -> None:
        self.session_facts(p)
        if isinstance(p.get("forkedFrom"), dict):  # a fork's first run says where from
            self.forked_from = ForkLink.model_validate(p["forkedFrom"])
        if isinstance(p.get("continuedAsNew"), dict):
            self.counters.runs = p["continuedAsNew"].get("run", self.counters.runs)
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
        if "actionType" not in p or event.action_id is None:
            return  # scoped variables a subagent waits for: not a pending action
        self.session_facts(p)
        action = PendingAction(
            action_id=event.action_id,
            kind=p["actionType"],
            tool_call_id=event.tool_call_id or "",
            tool_name=p.get("toolName") or "",
            turn_id=event.turn_id or "",
            prompt=p.get("prompt") or "",
            args=p.get("args") or {},
            decisions=p.get("decisions") or [],
            requested_at=p.get("requestedAt") or event.timestamp,
            timeout_seconds=p.get("timeoutSeconds"),
            expires_at=p.get("expiresAt"),
            on_timeout=p.get("onTimeout"),
        )
        self.pending[action.action_id] = action.model_dump(mode="json", by_alias=True)
        self._waiting()

    def action_resolved(self, event: Event, p: dict[str, Any]) -> None:
        self.pending.pop(event.action_id or "", None)
        self._waiting()
        if p.get("scope") == "session" and p.get("decision") == "approve" and p.get("toolName"):
            self.session_allowed.add(p["toolName"])

    def _waiting(self) -> None:
        """The status a wait on a person shows (`set_waiting`): a subagent writes no
        `session.updated`, so its status follows its actions."""
        if self.terminated_at is not None:
            return  # terminated: the close comes next (a root's `session.updated` says it)
        if not self.pending:
            self.status = "running"
            return
        kind = next(iter(self.pending.values()))["kind"]
        self.status = (
            "waiting_input" if kind in ("ask_human", "elicitation") else "waiting_permission"
        )

    def rolled_back(self, event: Event, p: dict[str, Any]) -> None:
        self.successor = p.get("successorThreadId") or self.successor

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
        effect = p.get("effect")
        if not isinstance(effect, dict) or not isinstance(effect.get("id"), str):
            return
        if event.type == "job.created":
            self.effects[effect["id"]] = effect
        else:  # started (it runs now), or cancelled: no longer pending
            self.effects.pop(effect["id"], None)

    def budget_fact(self, event: Event, p: dict[str, Any]) -> None:
        if event.type != "limit.changed" or p.get("reason") != "set_budget":
            return  # the ledger's own marks; the spend comes with the session facts
        current = self.budget or {"rootThreadId": p.get("rootThreadId"), "spent": {}}
        limits = p.get("limits") or {}
        # As `set_budget` applies it: new limits, no longer blocked; None without limits.
        self.budget = {**current, "limits": limits, "blocked": None} if limits else None

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
            status=self.status,
            active_turn_id=self.active_turn,
            active_side=self.active_side,
            queue=[QueuedItem.model_validate(item) for item in self.queue],
            pending_actions=list(self.pending.values()),
            children=list(self.children.values()),
            counters=self.counters,
            usage=_with_children(self.usage, self.children.values()),
            last_outcome=self.last_outcome,
            stop_reason=self.stop_reason,
            terminated_at=self.terminated_at,
            warnings=self.warnings,
            parent_thread_id=self.parent_id,
            incidents=list(self.incidents),
            permission_state=permission,
            unknown=["usage.costUsd"] if self.cost_unknown else [],
            updated_at=self.updated_at,
            context=self.context,
            agent_info=self.agent_info,
            budget=self.budget,
            # A due effect (its timer fired while a step runs) shows as not due: no event
            # states the timer; it runs, with `job.started`, once the step ends.
            scheduled_effects=[
                {**e, "due": False}
                for e in sorted(self.effects.values(), key=lambda e: (e["scheduledAt"], e["id"]))
            ],
            forked_from=self.forked_from,
            successor_thread_id=self.successor,
            definitions_digest=self.definitions_digest,
        )


_Handler = Callable[[_Fold, Event, dict[str, Any]], None]

_HANDLERS: dict[str, _Handler] = {
    "thread.started": _Fold.thread_started,
    "policy.changed": _Fold.policy_changed,
    "session.updated": _Fold.session_updated,
    "turn.started": _Fold.turn_started,
    "turn.completed": _Fold.turn_completed,
    "turn.failed": _Fold.turn_failed,
    "thread.updated": _Fold.thread_updated,
    "queue.changed": _Fold.queue_changed,
    "action.required": _Fold.action_required,
    "action.resolved": _Fold.action_resolved,
    "model.completed": _Fold.model_completed,
    "context.compaction.completed": _Fold.model_completed,  # the summariser's usage
    "runtime.warning": _Fold.runtime_warning,
    "limit.changed": _Fold.budget_fact,
    "history.rollback.completed": _Fold.rolled_back,
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
