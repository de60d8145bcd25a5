"""weft's metric counters from stored events, without a worker."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from weft.contract.events import Event
from weft.workers.metrics.event_counters import EventCounters
from weft.workers.metrics.labels import OTHER, BoundedLabel


def _event(type_: str, attempt_id: str | None = None, **payload: Any) -> Event:
    return Event(
        type=type_,
        event_id=f"{attempt_id}:{type_}",
        timestamp="2027-01-01T00:00:00Z",
        thread_id="t",
        attempt_id=attempt_id,
        payload=payload,
    )


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def test_failures_compactions_and_hooks_are_counted_by_kind() -> None:
    """An interrupted and a failed model call, a prompt tool's answer, a step error, a
    compaction of each outcome and a failed hook land in their series."""
    registry = CollectorRegistry()
    counters = EventCounters(registry)
    counters.observe(
        [
            _event("model.failed", model="m", code="interrupted"),
            _event("model.failed", model="m", errorType="ProviderRetryableError"),
            _event("model.completed", model="m", parentToolCallId="c1", usage={"inputTokens": 7}),
            _event("turn.completed", stopReason="step_error"),
            _event("turn.completed", stopReason="stop_on_response"),
            _event("context.compaction.completed", reason="budget"),
            _event("context.compaction.failed", reason="overflow"),
            _event("hook.failed", hook="before_tool_call"),
            _event("hook.completed", hook="before_tool_call"),
        ]
    )
    assert _value(registry, "weft_model_calls_total", model="m", status="interrupted") == 1
    assert _value(registry, "weft_model_calls_total", model="m", status="error") == 1
    assert _value(registry, "weft_model_calls_total", model="m", status="ok") == 1
    assert _value(registry, "weft_model_tokens_total", model="m", kind="input") == 7
    assert _value(registry, "weft_steps_total", status="ok") == 0  # inside a prompt tool
    assert _value(registry, "weft_steps_total", status="error") == 1
    assert _value(registry, "weft_compactions_total", status="completed", reason="budget") == 1
    assert _value(registry, "weft_compactions_total", status="failed", reason="overflow") == 1
    assert _value(registry, "weft_hook_failures_total", hook="before_tool_call") == 1


def test_spend_comes_from_cost_recorded_when_an_attempt_has_it() -> None:
    """An attempt with `cost.recorded` beside its `model.completed` is counted once, from
    the former; a failed attempt's `cost.recorded` counts; an attempt without one counts
    from `model.completed`."""
    registry = CollectorRegistry()
    counters = EventCounters(registry)
    usage = {"inputTokens": 10, "outputTokens": 2}
    counters.observe(
        [
            _event("model.completed", "a1", model="m", usage=usage, costUsd=0.5),
            _event("cost.recorded", "a1", model="m", **usage, costUsd=0.5),
        ]
    )
    counters.observe([_event("cost.recorded", "a2", model="m", inputTokens=4, costUsd=0.25)])
    counters.observe([_event("model.completed", "a3", model="m", usage=usage, costUsd=1.0)])
    assert _value(registry, "weft_model_tokens_total", model="m", kind="input") == 24
    assert _value(registry, "weft_model_tokens_total", model="m", kind="output") == 4
    assert _value(registry, "weft_model_cost_usd_total", model="m") == 1.75


def test_label_values_are_bounded() -> None:
    """Past its limit a label passes only the values it already knows; others are "other"."""
    label = BoundedLabel(limit=2)
    assert [label(v) for v in ["a", "b", "c", "a", None]] == ["a", "b", OTHER, "a", OTHER]
