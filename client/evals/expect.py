"""Checking a case's turns against its expectations: pure functions, one `Check` each."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import jsonschema

from weft.activities.tool_replay import call_text
from weft.contract.evals import CallRecord, Check, Expectations, ToolCallSpec, TurnRecord


def subset(expected: Any, actual: Any) -> bool:
    """Whether `expected` is a JSON subset of `actual`: objects by key, lists item by item."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            key in actual and subset(value, actual[key]) for key, value in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(subset(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return bool(expected == actual)


def _fits(spec: ToolCallSpec, call: CallRecord) -> bool:
    return spec.name == call.name and (
        spec.arguments is None or subset(spec.arguments, call.arguments)
    )


def _calls(calls: Sequence[CallRecord | ToolCallSpec]) -> str:
    return ", ".join(call_text(c.name, c.arguments or {}) for c in calls) or "(none)"


def tool_call_checks(expect: Expectations, calls: list[CallRecord]) -> list[Check]:
    """The equal / include / exclude checks of the turn's tool calls."""
    rule = expect.tool_calls
    if rule is None:
        return []
    checks: list[Check] = []
    got = f"got {_calls(calls)}"
    if rule.equal is not None:
        same = len(rule.equal) == len(calls) and all(
            _fits(s, c) for s, c in zip(rule.equal, calls, strict=False)
        )
        checks.append(Check(name="toolCalls.equal", passed=same, detail=_want(rule.equal, got)))
    if rule.include is not None:
        left = iter(calls)  # a subsequence: each expected call after the previous one
        found = all(any(_fits(spec, call) for call in left) for spec in rule.include)
        checks.append(
            Check(name="toolCalls.include", passed=found, detail=_want(rule.include, got))
        )
    if rule.exclude is not None:
        bad = [c for c in calls if any(_fits(s, c) for s in rule.exclude)]
        checks.append(
            Check(
                name="toolCalls.exclude",
                passed=not bad,
                detail=f"made the excluded call(s) {_calls(bad)}" if bad else "",
            )
        )
    return checks


def _want(specs: list[ToolCallSpec], got: str) -> str:
    return f"expected {_calls(specs)}; {got}"


def answer_checks(expect: Expectations, answer: str | None) -> list[Check]:
    """contains, matches and schema against the answer text."""
    text = answer or ""
    checks = [
        Check(
            name=f"contains {needle!r}",
            passed=needle in text,
            detail="" if needle in text else f"answer was {_short(text)}",
        )
        for needle in expect.contains
    ]
    if expect.matches is not None:
        hit = re.search(expect.matches, text) is not None
        checks.append(
            Check(
                name=f"matches /{expect.matches}/",
                passed=hit,
                detail="" if hit else f"answer was {_short(text)}",
            )
        )
    if expect.schema_ is not None:
        checks.append(_schema_check(expect.schema_, text))
    return checks


def _schema_check(schema: dict[str, Any], text: str) -> Check:
    try:
        value = json.loads(text)
    except ValueError:
        return Check(name="schema", passed=False, detail=f"answer is not JSON: {_short(text)}")
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(value)
    )
    if error is None:
        return Check(name="schema", passed=True)
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return Check(name="schema", passed=False, detail=f"at {where}: {error.message}")


def limit_checks(expect: Expectations, turns: list[TurnRecord], wall: float) -> list[Check]:
    """steps, tokens, cost and wall time under their limits, and no failed turn."""
    checks: list[Check] = []
    limits = [
        ("maxSteps", expect.max_steps, sum(t.steps for t in turns)),
        ("maxTokens", expect.max_tokens, sum(t.tokens for t in turns)),
        ("maxCostUsd", expect.max_cost_usd, sum(t.cost_usd for t in turns)),
        ("maxWallSeconds", expect.max_wall_seconds, wall),
    ]
    for name, limit, used in limits:
        if limit is not None:
            ok = used <= limit
            checks.append(Check(name=name, passed=ok, detail="" if ok else f"{used:g} > {limit:g}"))
    if expect.no_failed_turn:
        failed = [t for t in turns if t.status != "completed"]
        checks.append(
            Check(
                name="noFailedTurn",
                passed=not failed,
                detail="; ".join(f"{t.status}: {t.error or ''}".strip() for t in failed),
            )
        )
    return checks


def turn_checks(expect: Expectations, turn: TurnRecord, number: int, wall: float) -> list[Check]:
    """Every check of one turn's expectations, numbered with the turn."""
    checks = [
        *answer_checks(expect, turn.answer),
        *tool_call_checks(expect, turn.tool_calls),
        # A failed turn is the case's check (noFailedTurn), not repeated per turn.
        *limit_checks(expect.model_copy(update={"no_failed_turn": False}), [turn], wall),
    ]
    return [check.model_copy(update={"turn": number}) for check in checks]


def _short(text: str, limit: int = 120) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
