"""Answers to a pending action: checked, then recorded.

`respond_action` (signal) and `respond_action_checked` (update) both go through
`check_response`, so they accept and refuse exactly the same answers; the waiting gate
(`workflows/human_gate.py`) wakes once `apply_response` has recorded one.
"""

from __future__ import annotations

from typing import Protocol

from weft.contract.actions import ActionResolution, ActionResponse, UnanswerableReason
from weft.contract.carry_parts import ActionBook
from weft.contract.mcp import elicitation_problems


class UnanswerableAction(Exception):
    """An answer that cannot resolve anything now; the message says why, `reason` says it
    for code (the HTTP API picks its status by it)."""

    def __init__(self, message: str, reason: UnanswerableReason) -> None:
        super().__init__(message)
        self.reason = reason


class AnswersView(Protocol):
    """What checking and recording an answer reads and changes of the thread."""

    @property
    def actions(self) -> ActionBook: ...

    def timestamp(self) -> str: ...


def check_response(mem: AnswersView, response: ActionResponse) -> None:
    """Raise `UnanswerableAction` when `response` cannot resolve anything now."""
    resolved = mem.actions.resolved.get(response.action_id)
    if resolved is not None:
        raise UnanswerableAction(
            f"action {response.action_id!r} was already resolved at {resolved.resolved_at} "
            f"({resolved.decision} by {resolved.decided_by})",
            "already_resolved",
        )
    action = mem.actions.pending.get(response.action_id)
    if action is None:
        pending = ", ".join(mem.actions.pending) or "none"
        raise UnanswerableAction(
            f"no pending action {response.action_id!r}; pending actions: {pending}",
            "not_pending",
        )
    if response.decision not in action.decisions:
        raise UnanswerableAction(
            f"decision {response.decision!r} cannot answer {action.kind} action "
            f"{action.action_id!r}; "
            f"expected one of {', '.join(action.decisions)}",
            "wrong_decision",
        )
    if action.kind == "elicitation" and response.decision == "answer":
        problems = elicitation_problems(action.args.get("requestedSchema") or {}, response.answer)
        if problems:
            raise UnanswerableAction(
                f"the answer to elicitation {action.action_id!r} does not fit what MCP server "
                f"{action.args.get('server')!r} asked for: {'; '.join(problems)}",
                "misfit_answer",
            )


def apply_response(mem: AnswersView, response: ActionResponse) -> None:
    """Record a human's checked answer; the waiting gate wakes up and emits the events."""
    action = mem.actions.pending[response.action_id]
    mem.actions.resolved[response.action_id] = ActionResolution(
        action_id=action.action_id,
        kind=action.kind,
        decision=response.decision,
        decided_by="human",
        scope=response.scope,
        answer=response.answer,
        reason=response.reason,
        resolved_at=mem.timestamp(),
    )
