"""Human-in-the-loop actions: the ask_human tool, permission policies and answers to both.

An action is one pending human (or policy) decision with a stable `actionId`. Threads list
their pending actions in `thread_read`; any service answers one with the `respond_action`
signal (plain JSON) or the `respond_action_checked` update (validated, answered).
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import Field, model_validator

from weft.contract.wire import CamelModel

SIGNAL_RESPOND_ACTION = "respond_action"
UPDATE_RESPOND_ACTION_CHECKED = "respond_action_checked"

# The built-in tool a prompt lists to let its model ask a human a question.
ASK_HUMAN_TOOL = "ask_human"
ASK_HUMAN_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "description": "what to ask the human"}},
    "required": ["question"],
}

ActionKind = Literal["ask_human", "tool_permission", "elicitation"]
Decision = Literal["approve", "deny", "answer"]
ApprovalScope = Literal["once", "session"]
DecidedBy = Literal["rule", "mode", "session", "human", "timeout", "terminate", "interrupt"]
PermissionMode = Literal["default", "auto", "plan"]
# Why an answer cannot resolve anything: the `reason` in the details of the
# `UnanswerableAction` error that the checked update raises.
UnanswerableReason = Literal["already_resolved", "not_pending", "wrong_decision", "misfit_answer"]
RuleDecision = Literal["allow", "ask", "deny"]


class ActionResponse(CamelModel):
    """The `respond_action` payload: `{actionId, decision, answer?, scope?, reason?}`.

    `answer` answers an ask_human action (decision `answer`); `approve` and `deny` answer a
    tool permission (and `deny` also declines an ask_human question). `scope: session`
    approves the tool for the rest of the thread's session ("approve and stop asking").
    """

    action_id: str = Field(min_length=1, max_length=256)
    decision: Decision
    answer: Any = None
    scope: ApprovalScope = "once"
    reason: str | None = Field(default=None, max_length=4096)

    @model_validator(mode="after")
    def _consistent(self) -> ActionResponse:
        if self.decision == "answer" and self.answer is None:
            raise ValueError("decision 'answer' needs an 'answer'")
        if self.decision != "answer" and self.answer is not None:
            raise ValueError(f"decision {self.decision!r} takes no 'answer'")
        if self.scope == "session" and self.decision != "approve":
            raise ValueError("scope 'session' only applies to decision 'approve'")
        return self


class PendingAction(CamelModel):
    """A decision the thread waits for, as `thread_read.pendingActions` lists it."""

    action_id: str
    kind: ActionKind
    tool_call_id: str
    tool_name: str
    turn_id: str
    prompt: str = Field(description="the question, or what the tool wants to do")
    args: dict[str, Any] = Field(default_factory=dict)
    decisions: list[Decision]
    requested_at: str
    timeout_seconds: float | None = None
    expires_at: str | None = None
    on_timeout: str | None = Field(
        default=None, description="what happens at expiry: deny, approve or answer (a default)"
    )


class ActionResolution(CamelModel):
    """How an action ended: who decided, and what."""

    action_id: str
    kind: ActionKind
    decision: Decision
    decided_by: DecidedBy
    scope: ApprovalScope = "once"
    answer: Any = None
    reason: str | None = None
    resolved_at: str


class RespondActionResult(CamelModel):
    """What `respond_action_checked` returns."""

    action_id: str
    status: Literal["resolved"] = "resolved"
    decision: Decision


class PermissionRule(CamelModel):
    """One rule: a tool-name pattern, argument patterns, and allow/ask/deny.

    Patterns are shell-style (`*`, `?`, `[...]`). Every `args` pattern must match the
    argument's value (strings as they are, other values as compact JSON); a missing
    argument does not match.
    """

    tool: str = Field(default="*", min_length=1)
    args: dict[str, str] = Field(default_factory=dict)
    decision: RuleDecision
    reason: str | None = None

    def matches(self, tool: str, args: dict[str, Any]) -> bool:
        """Whether this rule applies to a call of `tool` with `args`."""
        if not fnmatchcase(tool, self.tool):
            return False
        for name, pattern in self.args.items():
            if name not in args:
                return False
            value = args[name]
            text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
            if not fnmatchcase(text, pattern):
                return False
        return True


class PermissionPolicy(CamelModel):
    """Tool permissions of an agent or a prompt (the prompt's mode wins; rules add up).

    Precedence: a matching `deny` rule, then a session approval, then `ask`, then `allow`,
    then the mode: `default` asks, `auto` allows, `plan` denies. So an ask or deny rule
    always overrides an automatic allow.
    """

    mode: PermissionMode | None = None
    rules: list[PermissionRule] = Field(default_factory=list)
    ask_timeout_seconds: float | None = Field(default=None, gt=0)
    on_timeout: Literal["deny", "approve"] = "deny"


class AskHumanOptions(CamelModel):
    """`options` of the ask_human entry in a prompt's tools: its timeout and default."""

    timeout_seconds: float | None = Field(default=None, gt=0)
    default: Any = Field(default=None, description="the answer used when the timeout expires")
