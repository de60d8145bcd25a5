"""When an idle run's watch is armed: only a run recorded with the idle patch, with the
option set, that has added a turn's worth of history, and once per history length (a
continue-as-new refused for a waiter is not tried again and again)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest
import temporalio.workflow

from weft.contract.thread import ThreadOptions
from weft.workflows import history_gauge
from weft.workflows.history_gauge import HistoryGauge, HistoryReading
from weft.workflows.idle_watch import IDLE_SHED_EVENTS, IdleWatch


class Run:
    """A run's memory as the watch reads it, with a gauge fed by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, idle_seconds: float | None) -> None:
        self.readings = [HistoryReading(events=12, size_bytes=0, suggested=False)]
        monkeypatch.setattr(history_gauge, "live_reading", lambda: self.readings[-1])
        monkeypatch.setattr(temporalio.workflow, "patched", lambda _patch_id: True)
        self.history = HistoryGauge()
        self.history.start()
        options = ThreadOptions(continue_as_new_idle_seconds=idle_seconds)
        self.start = SimpleNamespace(options=options)

    def grow_to(self, events: int) -> None:
        self.readings.append(HistoryReading(events=events, size_bytes=0, suggested=False))
        self.history.read()


def watch(run: Run, patched: bool = True) -> IdleWatch:
    made = IdleWatch(cast(Any, run))
    made._patched = patched
    return made


def test_a_run_that_ran_a_turn_is_armed(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(monkeypatch, idle_seconds=900)
    idle = watch(run)
    assert idle.armed_seconds() is None  # a run that has run nothing yet
    run.grow_to(12 + IDLE_SHED_EVENTS - 1)
    assert idle.armed_seconds() is None
    run.grow_to(12 + IDLE_SHED_EVENTS)
    assert idle.armed_seconds() == 900


def test_not_armed_without_the_option_or_the_patch(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(monkeypatch, idle_seconds=None)
    run.grow_to(500)
    assert watch(run).armed_seconds() is None
    run = Run(monkeypatch, idle_seconds=900)
    run.grow_to(500)
    assert watch(run, patched=False).armed_seconds() is None


def test_due_once_until_the_run_adds_history(monkeypatch: pytest.MonkeyPatch) -> None:
    run = Run(monkeypatch, idle_seconds=60)
    idle = watch(run)
    run.grow_to(80)
    assert idle.armed_seconds() == 60
    idle.due = True  # the watch's timer found the run quiet for 60 s
    assert idle.take_due()
    assert not idle.take_due()
    # The continue-as-new was refused (a waiter): no new watch until the run does more.
    assert idle.armed_seconds() is None
    run.grow_to(95)
    assert idle.armed_seconds() == 60
