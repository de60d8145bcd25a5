"""How long this run's history is, read only where a replay reads the same.

Temporal reports the history's length and size, and whether it suggests continuing as
new, with each activation. The activation that resumes the workflow after a local
activity is not a safe place to read them: a first run can report a later length there
than its replay does. A probe caught it: 61 turns, one reading after each turn's closing
`store.flush`; one reading was 27 events on the first run and 22 on its replay. A run
that decided to continue as new on such a reading asked for its patch where the replay
did not, and the replay failed with a nondeterminism error (CI, the 400-turn compaction
test).

So the gauge reads only when a regular activity resolves, and when the run starts. Each
is the first activation of a workflow task, reporting that task's own figures on the
first run and on every replay. A reading is at most one step old; a run continues as new
at most one step later than a live reading would have made it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from temporalio import workflow
from temporalio.exceptions import ActivityError, CancelledError

from weft.contract.thread import ThreadOptions

# Runs recorded before the gauge decided from live readings; their replays still do.
GAUGE_PATCH = "history-gauge-v1"


@dataclass(frozen=True)
class HistoryReading:
    """The history's figures as one workflow task reported them."""

    events: int
    size_bytes: int
    suggested: bool
    # A pinned run whose deployment's target version is another build (it moves at its
    # next idle continue-as-new); read here for the same reason as the length.
    target_changed: bool = False

    def is_long(self, options: ThreadOptions) -> bool:
        """Past the thread's thresholds, or Temporal suggests to continue as new."""
        return (
            self.suggested
            or self.events >= options.continue_as_new_events
            or self.size_bytes >= options.continue_as_new_bytes
        )


def live_reading() -> HistoryReading:
    """What the current activation reports (safe only in a workflow task's first one)."""
    info = workflow.info()
    return HistoryReading(
        events=info.get_current_history_length(),
        size_bytes=info.get_current_history_size(),
        suggested=info.is_continue_as_new_suggested(),
        target_changed=info.is_target_worker_deployment_version_changed(),
    )


class HistoryGauge:
    """The run's last safe reading of its history (not carried: each run has its own)."""

    def __init__(self) -> None:
        self.in_use = False
        self._last = HistoryReading(events=0, size_bytes=0, suggested=False)
        # The reading the run started with: how much the run itself has added.
        self.first = self._last

    def start(self) -> None:
        """Called first in the run: whether this run decides from the gauge, and a reading.

        The patch is asked for here because the first activation is the same on every
        replay; asked later, its own marker could land at a point a replay reaches in
        another workflow task.
        """
        self.in_use = workflow.patched(GAUGE_PATCH)
        self.read()
        self.first = self._last

    def grown(self) -> int:
        """The events this run has added to its history, as of the last reading."""
        return self._last.events - self.first.events

    def read(self) -> None:
        self._last = live_reading()

    def watch(self, handle: asyncio.Future[Any]) -> None:
        """Read again when `handle`, a regular activity, resolves from history.

        Not when the workflow cancelled it: a cancel resolves the handle in a later
        activation of the same workflow task, as a local activity does.
        """
        handle.add_done_callback(self._resolved)

    def _resolved(self, handle: asyncio.Future[Any]) -> None:
        if handle.cancelled():
            return
        err = handle.exception()
        if isinstance(err, ActivityError) and isinstance(err.cause, CancelledError):
            return
        self.read()

    @property
    def last(self) -> HistoryReading:
        return self._last
