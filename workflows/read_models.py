"""The thread read model (seed 001 `thread_read_model`) built from the workflow's memory.

Facts the thread cannot know are listed in `unknown` rather than guessed.
"""

from __future__ import annotations

from typing import Any

from contract.actions import PermissionPolicy
from contract.messages import Side
from contract.thread import StopReason, ThreadRead, ThreadStatus, UsageTotals
from workflows.thread_state import ThreadMemory


def thread_read(
    mem: ThreadMemory,
    *,
    agent: str,
    status: ThreadStatus,
    active_turn_id: str | None,
    active_side: Side | None,
    last_outcome: str | None,
    stop_reason: StopReason | None,
    terminated_at: str | None,
    parent_thread_id: str | None,
    policy: dict[str, Any],
    children: list[dict[str, Any]],
    usage: UsageTotals,
) -> ThreadRead:
    """Everything `thread_read` shows, from the workflow's own state."""
    unknown = []
    if mem.cost_unknown:
        unknown.append("usage.costUsd")  # a model without a price answered
    return ThreadRead(
        thread_id=mem.thread_id,
        agent=agent,
        session_id=mem.session_id,
        status=status,
        active_turn_id=active_turn_id,
        active_side=active_side,
        queue=[e.to_item() for e in mem.queue],
        pending_actions=[
            a.model_dump(mode="json", by_alias=True) for a in mem.pending_actions.values()
        ],
        children=children,
        counters=mem.counters,
        usage=usage,
        last_outcome=last_outcome,
        stop_reason=stop_reason,
        terminated_at=terminated_at,
        warnings=mem.warnings,
        parent_thread_id=parent_thread_id,
        incidents=list(mem.incidents),
        permission_state=policy,
        unknown=unknown,
        updated_at=mem.timestamp(),
    )


def permission_state(
    mem: ThreadMemory, agent: PermissionPolicy | None, prompt: PermissionPolicy | None
) -> dict[str, Any]:
    """The active side's permission mode, rules' origin and session approvals."""
    mode = (prompt.mode if prompt else None) or (agent.mode if agent else None)
    if agent is None and prompt is None:
        return {"policy": "none", "sessionAllowedTools": sorted(mem.session_allowed_tools)}
    return {
        "policy": "configured",
        "mode": mode or "default",
        "rules": {
            "agent": len(agent.rules) if agent else 0,
            "prompt": len(prompt.rules) if prompt else 0,
        },
        "sessionAllowedTools": sorted(mem.session_allowed_tools),
        "pendingApprovals": sum(
            1 for a in mem.pending_actions.values() if a.kind == "tool_permission"
        ),
    }
