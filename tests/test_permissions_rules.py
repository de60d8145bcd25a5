"""Permission evaluation in isolation: precedence, patterns and how policies merge."""

from __future__ import annotations

from typing import Any

import pytest

from weft.contract.definitions import AgentDef, PromptDef
from weft.contract.permissions import effective_policy, evaluate


def _policy(agent: dict[str, Any] | None, prompt: dict[str, Any] | None = None) -> Any:
    agent_def = AgentDef.model_validate(
        {"name": "a", "sideA": {"prompt": "p"}, "permissions": agent}
    )
    prompt_def = PromptDef.model_validate(
        {"name": "p", "toolDescription": "t", "model": "m", "prompt": "x", "permissions": prompt}
    )
    return effective_policy(agent_def, prompt_def)


@pytest.mark.parametrize(
    ("rules", "mode", "tool", "args", "expected"),
    [
        ([], "auto", "weather", {}, ("allow", "mode")),
        ([], "default", "weather", {}, ("ask", "mode")),
        ([], "plan", "weather", {}, ("deny", "mode")),
        ([{"tool": "weather", "decision": "deny"}], "auto", "weather", {}, ("deny", "rule")),
        (
            [{"tool": "*", "decision": "allow"}, {"tool": "w*", "decision": "ask"}],
            "auto",
            "weather",
            {},
            ("ask", "rule"),
        ),
        (
            [
                {"tool": "*", "decision": "allow"},
                {"tool": "weather", "decision": "deny"},
                {"tool": "weather", "decision": "ask"},
            ],
            "auto",
            "weather",
            {},
            ("deny", "rule"),
        ),
        ([{"tool": "weather", "decision": "allow"}], "plan", "weather", {}, ("allow", "rule")),
        (
            [{"args": {"city": "Par*"}, "decision": "deny"}],
            "auto",
            "weather",
            {"city": "Paris"},
            ("deny", "rule"),
        ),
        (
            [{"args": {"city": "Par*"}, "decision": "deny"}],
            "auto",
            "weather",
            {"city": "Oslo"},
            ("allow", "mode"),
        ),
        ([{"args": {"city": "*"}, "decision": "deny"}], "auto", "weather", {}, ("allow", "mode")),
        (
            [{"args": {"days": "[1-3]"}, "decision": "allow"}],
            "default",
            "weather",
            {"days": 2},
            ("allow", "rule"),
        ),
        (
            [{"args": {"days": "[1-3]"}, "decision": "allow"}],
            "default",
            "weather",
            {"days": 7},
            ("ask", "mode"),
        ),
    ],
)
def test_precedence_and_patterns(rules, mode, tool, args, expected):
    """deny beats ask beats allow beats the mode; argument patterns must all match."""
    verdict = evaluate(_policy({"mode": mode, "rules": rules}), tool, args, set())
    assert (verdict.decision, verdict.decided_by) == expected


def test_session_approval_beats_ask_but_not_deny():
    """A tool approved for the session skips ask rules and the mode, never a deny rule."""
    policy = _policy(
        {
            "rules": [
                {"tool": "weather", "decision": "ask"},
                {"tool": "note", "decision": "deny"},
            ]
        }
    )
    approved = {"weather", "note"}
    assert evaluate(policy, "weather", {}, approved).decided_by == "session"
    assert evaluate(policy, "note", {}, approved).decision == "deny"


def test_prompt_mode_wins_and_rules_add_up():
    """The prompt's mode overrides the agent's; both rule lists apply, prompt rules first."""
    policy = _policy(
        {"mode": "plan", "rules": [{"tool": "note", "decision": "deny"}], "onTimeout": "approve"},
        {"mode": "auto", "rules": [{"tool": "note", "decision": "deny", "reason": "p"}]},
    )
    assert policy.mode == "auto" and policy.on_timeout == "approve"
    verdict = evaluate(policy, "note", {}, set())
    assert verdict.rule is not None and verdict.rule["origin"] == "prompt"
    assert evaluate(policy, "weather", {}, set()).decision == "allow"


def test_no_policy_means_no_evaluation():
    """Without a policy on the agent or the prompt there is nothing to evaluate."""
    assert _policy(None) is None
