"""weft's counters, derived from the events a worker's store newly commits.

The store reports each event once, after the commit that stored it
(`Store.on_events_stored`): an activity retried after its write, or a write retried after
a lost race, finds the event already stored and reports nothing. So the counters need no
edits in the activities and never count one fact twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from weft.contract.events import Event
from weft.workers.metrics.labels import BoundedLabel

# Token kinds of a model call's `usage` (contract/activities.py `Usage`), by label value.
TOKEN_KINDS = {"input": "inputTokens", "output": "outputTokens", "cached": "cachedTokens"}


class EventCounters:
    """Counters of steps, model calls, tokens, cost, tool calls, compactions and hook
    failures, in `registry`; `observe` is the store's after-commit observer."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._models = BoundedLabel()
        self._tools = BoundedLabel()
        self._kinds = BoundedLabel(limit=32)  # hook points, compaction reasons: fixed sets
        self.steps = Counter(
            "weft_steps",
            "Steps by outcome: ok when the step's model answered, error when the step "
            "failed and ended the session",
            ["status"],
            registry=registry,
        )
        self.model_calls = Counter(
            "weft_model_calls",
            "Model call attempts by model and status (ok, error, interrupted)",
            ["model", "status"],
            registry=registry,
        )
        self.tokens = Counter(
            "weft_model_tokens",
            "Tokens of model call attempts (failed ones estimated) by model and kind "
            "(input, output, cached: the part of input the provider served from its cache)",
            ["model", "kind"],
            registry=registry,
        )
        self.cost = Counter(
            "weft_model_cost_usd",
            "Cost in USD of model call attempts by model (models without a price add 0)",
            ["model"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "weft_tool_calls",
            "Tool calls by tool and status (ok, error)",
            ["tool", "status"],
            registry=registry,
        )
        self.compactions = Counter(
            "weft_compactions",
            "Context compactions by status (completed, failed) and reason",
            ["status", "reason"],
            registry=registry,
        )
        self.hook_failures = Counter(
            "weft_hook_failures",
            "Hook runs that failed, by hook point",
            ["hook"],
            registry=registry,
        )
        self._by_type: Mapping[str, Callable[[Event, dict[str, Any]], None]] = {
            "model.completed": self._model_completed,
            "model.failed": self._model_failed,
            "tool.result": lambda e, p: self._tool(p, "ok"),
            "tool.failed": lambda e, p: self._tool(p, "error"),
            "context.compaction.completed": lambda e, p: self._compaction(p, "completed"),
            "context.compaction.failed": lambda e, p: self._compaction(p, "failed"),
            "hook.failed": self._hook_failed,
            "turn.completed": self._turn_completed,
        }

    def observe(self, events: Sequence[Event]) -> None:
        """Count what `events`, newly committed by the store, say happened."""
        # Spend is counted from `cost.recorded` (every attempt, failed ones too, written
        # in the same commit as the attempt's outcome); from `model.completed` only for an
        # attempt that has none.
        costed = {e.attempt_id for e in events if e.type == "cost.recorded" and e.attempt_id}
        for event in events:
            payload = event.payload if isinstance(event.payload, dict) else {}
            count = self._by_type.get(event.type)
            if count is not None:
                count(event, payload)
            if event.type == "cost.recorded":
                self._spend(payload.get("model"), payload, payload.get("costUsd"))
            elif event.type == "model.completed" and event.attempt_id not in costed:
                usage = payload.get("usage")
                usage = usage if isinstance(usage, dict) else {}
                self._spend(payload.get("model"), usage, payload.get("costUsd"))

    def _model_completed(self, event: Event, payload: dict[str, Any]) -> None:
        model = self._models(payload.get("model"))
        self.model_calls.labels(model, "ok").inc()
        if "parentToolCallId" not in payload:  # a prompt tool's calls are inside a step
            self.steps.labels("ok").inc()

    def _spend(self, model_name: object, usage: dict[str, Any], cost: object) -> None:
        model = self._models(model_name)
        for kind, key in TOKEN_KINDS.items():
            tokens = usage.get(key)
            if isinstance(tokens, int) and tokens > 0:
                self.tokens.labels(model, kind).inc(tokens)
        self.cost.labels(model).inc(cost if isinstance(cost, int | float) and cost > 0 else 0)

    def _model_failed(self, event: Event, payload: dict[str, Any]) -> None:
        # The workflow writes `model.failed` with code "interrupted" when a new message
        # cut the call short; the activity writes it, with an errorType, for a failure.
        status = "interrupted" if payload.get("code") == "interrupted" else "error"
        self.model_calls.labels(self._models(payload.get("model")), status).inc()

    def _tool(self, payload: dict[str, Any], status: str) -> None:
        self.tool_calls.labels(self._tools(payload.get("name")), status).inc()

    def _compaction(self, payload: dict[str, Any], status: str) -> None:
        self.compactions.labels(status, self._kinds(payload.get("reason"))).inc()

    def _hook_failed(self, event: Event, payload: dict[str, Any]) -> None:
        self.hook_failures.labels(self._kinds(payload.get("hook"))).inc()

    def _turn_completed(self, event: Event, payload: dict[str, Any]) -> None:
        # A step whose model never answered ends the session with this stop reason.
        if payload.get("stopReason") == "step_error":
            self.steps.labels("error").inc()
