"""Tool permission evaluation: rules and modes in, one verdict naming what decided it out.

Pure and deterministic, so the workflow can evaluate every tool call itself. Precedence
(seed 001: "deny/ask rules must be able to override automatic allow"): a matching `deny`
rule, a session approval, a matching `ask` rule, a matching `allow` rule, then the mode.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weft.contract.actions import (
    DecidedBy,
    PermissionMode,
    PermissionPolicy,
    PermissionRule,
    RuleDecision,
)
from weft.contract.definitions import AgentDef, PromptDef

MODE_DECISIONS: dict[PermissionMode, RuleDecision] = {
    "default": "ask",
    "auto": "allow",
    "plan": "deny",
}


@dataclass(frozen=True)
class EffectivePolicy:
    """The agent's and the prompt's policies merged for one side."""

    mode: PermissionMode
    rules: tuple[tuple[str, int, PermissionRule], ...]  # (origin, index, rule)
    ask_timeout_seconds: float | None
    on_timeout: str


@dataclass(frozen=True)
class Verdict:
    """What the policy says about one call, and why."""

    decision: RuleDecision
    decided_by: DecidedBy
    mode: PermissionMode
    rule: dict[str, Any] | None = None

    def describe(self) -> dict[str, Any]:
        """The verdict as `permission.evaluated` carries it."""
        described: dict[str, Any] = {
            "decision": self.decision,
            "decidedBy": self.decided_by,
            "mode": self.mode,
        }
        if self.rule is not None:
            described["rule"] = self.rule
        return described


def effective_policy(agent: AgentDef, prompt: PromptDef) -> EffectivePolicy | None:
    """The merged policy, or None when neither the agent nor the prompt has one."""
    parts = [("prompt", prompt.permissions), ("agent", agent.permissions)]
    present = [(origin, p) for origin, p in parts if p is not None]
    if not present:
        return None
    mode: PermissionMode = next((p.mode for _, p in present if p.mode), "default")
    timeout = next((p.ask_timeout_seconds for _, p in present if p.ask_timeout_seconds), None)
    on_timeout = next(
        (p.on_timeout for _, p in present if "on_timeout" in p.model_fields_set), "deny"
    )
    rules = tuple((origin, i, rule) for origin, p in present for i, rule in enumerate(p.rules))
    return EffectivePolicy(mode, rules, timeout, on_timeout)


def evaluate(
    policy: EffectivePolicy, tool: str, args: dict[str, Any], session_allowed: set[str]
) -> Verdict:
    """Decide one tool call: deny > session approval > ask > allow > mode."""
    matched: dict[RuleDecision, tuple[str, int, PermissionRule]] = {}
    for origin, index, rule in policy.rules:
        if rule.decision not in matched and rule.matches(tool, args):
            matched[rule.decision] = (origin, index, rule)
    if "deny" in matched:
        return _by_rule("deny", policy, matched["deny"])
    if tool in session_allowed:
        return Verdict("allow", "session", policy.mode)
    if "ask" in matched:
        return _by_rule("ask", policy, matched["ask"])
    if "allow" in matched:
        return _by_rule("allow", policy, matched["allow"])
    return Verdict(MODE_DECISIONS[policy.mode], "mode", policy.mode)


def policy_of(policy: PermissionPolicy | None) -> dict[str, Any] | None:
    """A policy as JSON, for read models."""
    return policy.model_dump(mode="json", exclude_none=True) if policy else None


def _by_rule(
    decision: RuleDecision, policy: EffectivePolicy, hit: tuple[str, int, PermissionRule]
) -> Verdict:
    origin, index, rule = hit
    described = {
        "origin": origin,
        "index": index,
        **rule.model_dump(mode="json", exclude_none=True),
    }
    return Verdict(decision, "rule", policy.mode, described)
