"""When an idle run arms its continue-as-new timer: only a run recorded with the idle
patch, with the option set, that has added a turn's worth of history, and once per
history length (a continue-as-new refused for a waiter is not tried again and again)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from weft.contract.thread import ThreadOptions
from weft.workflows import history_gauge
from weft.workflows.continuation import IDLE_SHED_EVENTS, Continuation
from weft.workflows.history_gauge import HistoryGauge, HistoryReading


class Run:
    """A run's memory as the continuation reads it, with a gauge fed by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, idle_seconds: float | None) -> None:
        self.readings = [HistoryReading(events=12, size_bytes=0, suggested=False)]
        monkeypatch.setattr(history_gauge, "live_reading", lambda: self.readings[-1])
        monkeypatch.setattr(history_gauge.workflow, "patched", lambda _patch_id: True)
        self.history = HistoryGauge()
        self.history.start()
        options = ThreadOptions(continue_as_new_idle_seconds=idle_seconds)
        self.start = SimpleNamespace(options=options)

    def grow_to(self, events: int) -> None:
        self.readings.append(HistoryReading(events=events, size_bytes=0, suggested=False))
        self.history.read()


def continuation(run: Run, patched: bool = True) -> Continuation:
    made = Continuation(cast(Any, run), cast(Any, None), cast(Any, None), cast(Any, None))
    made._idle_patched = patched
    return made


def test_a_run_that_ran_a_turn_arms_the_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(monkeypatch, idle_seconds=900)
    idle = continuation(run)
    assert idle.idle_timeout() is None  # a run that has run nothing yet
    run.grow_to(12 + IDLE_SHED_EVENTS - 1)
    assert idle.idle_timeout() is None
    run.grow_to(12 + IDLE_SHED_EVENTS)
    assert idle.idle_timeout() == 900


def test_no_timer_without_the_option_or_the_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(monkeypatch, idle_seconds=None)
    run.grow_to(500)
    assert continuation(run).idle_timeout() is None
    run = Run(monkeypatch, idle_seconds=900)
    run.grow_to(500)
    assert continuation(run, patched=False).idle_timeout() is None


async def test_a_refused_idle_continue_is_tried_again_only_after_more_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = Run(monkeypatch, idle_seconds=60)
    idle = continuation(run)
    tried: list[bool] = []

    async def refused(turn: object, *, idle: bool = False) -> None:
        tried.append(idle)  # `_may_continue` said no: the run goes on

    monkeypatch.setattr(idle, "continue_if_due", refused)
    run.grow_to(80)
    assert idle.idle_timeout() == 60
    await idle.continue_idle()
    assert tried == [True]
    assert idle.idle_timeout() is None  # no timer again until the run does something
    run.grow_to(95)
    assert idle.idle_timeout() == 60
