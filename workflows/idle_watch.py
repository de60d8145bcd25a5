"""The quiet while after which an idle run continues as new (docs/long-threads.md).

A worker that no longer caches a thread replays its run's whole history on the next wake;
a run that continued as new while idle has little to replay. The watch decides when: a
run that has added a turn's worth of history and then stays idle for the thread's
`continue_as_new_idle_seconds` is due.

One timer per quiet while, and it is never cancelled: a thread woken before it fires goes
on, and when the timer fires it looks again (idle since when?) and sleeps what is left of
the newest quiet while. The workflow task that wakes the thread for an ask then carries no
`CancelTimer` command: measured with one, the model call's activity reached the worker
about 2 ms later (bench/bench_ttft.py, two alternated pairs).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any, Protocol

from temporalio import workflow

from weft.contract.thread import ThreadStartInput
from weft.workflows.history_gauge import HistoryGauge

# The patch that lets an idle run continue as new after `continue_as_new_idle_seconds`.
IDLE_PATCH = "continue-as-new-idle-v1"
# How many events a run must have added to its history before a quiet while sheds it:
# about one short turn's. A run that has just continued adds fewer (its carried write), so
# an idle continue-as-new is never followed by another one until a turn has run.
IDLE_SHED_EVENTS = 20
TIMER_SUMMARY = "idle: continue as new"


class IdleView(Protocol):
    """What the watch reads of the thread: its options and its history's readings."""

    @property
    def start(self) -> ThreadStartInput: ...

    @property
    def history(self) -> HistoryGauge: ...


class IdleWatch:
    """Whether the idle run is due to continue as new, from the quiet while it has waited."""

    def __init__(self, mem: IdleView) -> None:
        self._mem = mem
        self._patched = False
        # When the run last began to wait idle; None while it works.
        self._idle_since: datetime | None = None
        self._watching: asyncio.Task[Any] | None = None
        self.due = False
        # The history length at which the run was last due: it is due again only once the
        # run has done something since (a continue-as-new refused for a waiter is not
        # tried again and again).
        self._due_at: int | None = None

    def start_run(self) -> None:
        """Asks the idle patch: once per run, before any command of the run, so a run
        recorded before it never arms the timer, and every replay decides alike."""
        self._patched = workflow.patched(IDLE_PATCH)

    def armed_seconds(self) -> float | None:
        """The quiet while this run would wait before it is due; None: it is not armed.

        Only a run that has added a turn or more to its history sheds it: decided from the
        history gauge, which every replay reads alike.
        """
        mem = self._mem
        seconds = mem.start.options.continue_as_new_idle_seconds
        if not self._patched or seconds is None or not mem.history.in_use:
            return None
        if mem.history.grown() < IDLE_SHED_EVENTS:
            return None
        if self._due_at == mem.history.last.events:
            return None
        return seconds

    def began(self) -> None:
        """The run waits for work: the quiet while starts now (and the watch, if armed
        and not already running)."""
        self._idle_since = workflow.now()
        seconds = self.armed_seconds()
        if seconds is not None and self._watching is None:
            self._watching = asyncio.create_task(self._watch(seconds))

    def ended(self) -> None:
        """Something woke the run."""
        self._idle_since = None

    def take_due(self) -> bool:
        """Whether the run is due (once: the next quiet while needs more history)."""
        due, self.due = self.due, False
        if due:
            self._due_at = self._mem.history.last.events
        return due

    async def _watch(self, seconds: float) -> None:
        quiet = timedelta(seconds=seconds)
        while True:
            await workflow.wait_condition(lambda: self._idle_since is not None)
            assert self._idle_since is not None
            left = (self._idle_since + quiet - workflow.now()).total_seconds()
            if left <= 0:
                break
            await workflow.sleep(left, summary=TIMER_SUMMARY)
        self._watching = None
        self.due = True
