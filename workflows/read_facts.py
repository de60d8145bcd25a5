"""What `thread_read` shows that no other event states, written into the events that
mark when it holds, so the read model can be rebuilt from the log (contract/rebuild.py).
"""

from __future__ import annotations

from typing import Any, Protocol

from weft.contract.budget import BudgetState
from weft.contract.context_state import ContextState
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.messages import Side
from weft.contract.thread import Counters, StopReason
from weft.workflows.read_models import PermissionFacts, agent_info, permission_state


class SessionFacts(Protocol):
    """What the facts of a stopping thread read."""

    @property
    def counters(self) -> Counters: ...

    @property
    def window(self) -> ContextState: ...

    @property
    def budget(self) -> BudgetState | None: ...


class DefinitionFacts(PermissionFacts, Protocol):
    """What the facts of a starting turn read: the definitions in force."""

    @property
    def snapshot(self) -> DefinitionSnapshot | None: ...

    @property
    def definitions_digest(self) -> str | None: ...

    @property
    def active_side(self) -> Side | None: ...

    @property
    def active_agent(self) -> str | None: ...


class FailureFacts(Protocol):
    """What the facts of a failed turn read."""

    @property
    def last_outcome(self) -> str | None: ...

    @property
    def incidents(self) -> list[dict[str, Any]]: ...

    @property
    def stop_reason(self) -> StopReason | None: ...


def session_facts(mem: SessionFacts) -> dict[str, Any]:
    """The counters, the model context and the budget as the thread stops (idle, waiting
    on a person, terminated): steps and reserved message positions change with no event of
    their own, the context's token estimates are the workflow's, and the budget's spend is
    what the store last reported to it (None without limits, as `thread_read` shows it)."""
    budget = mem.budget if mem.budget and not mem.budget.limits.is_empty() else None
    return {
        "counters": mem.counters.model_dump(by_alias=True),
        "context": mem.window.read(),
        "budget": budget.model_dump(mode="json", by_alias=True) if budget else None,
    }


def definition_facts(mem: DefinitionFacts) -> dict[str, Any]:
    """The running agent's display fields and its active side's permission policy (the
    rules' origin and mode, not the session's approvals, which their own events state)."""
    snapshot, digest = mem.snapshot, mem.definitions_digest
    if snapshot is None:
        return {}
    own = snapshot.agent
    prompt = snapshot.prompts[own.side(mem.active_side or "a").prompt]
    running = snapshot.agent_def(mem.active_agent)
    policy = permission_state(mem, own.permissions, prompt.permissions)
    policy.pop("sessionAllowedTools", None)
    policy.pop("pendingApprovals", None)
    info = agent_info(running)
    facts: dict[str, Any] = {"agentInfo": info.model_dump(by_alias=True), "permissions": policy}
    if digest is not None:
        facts["definitionsDigest"] = digest
    return facts


def failure_facts(mem: FailureFacts) -> dict[str, Any]:
    """A failed turn's outcome and the incident that says why, when it has them."""
    facts: dict[str, Any] = {}
    if mem.last_outcome is not None:
        facts["outcome"] = mem.last_outcome
    if mem.incidents and mem.incidents[-1]["code"] == mem.stop_reason:
        facts["incident"] = mem.incidents[-1]
    return facts
