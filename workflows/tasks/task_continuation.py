"""When a `TaskRun` continues as new, and the points it may do so from (docs/tasks.md).

A task can live for weeks: waiting on dependencies (a recheck an hour), paused, taking
commands and progress. Its run continues as new once its history is long (Temporal
suggests it, or it passed the input's `continueAfterEvents`), but only from a *rest*: a
point where the work waits for something (a start, a resume, a dependency) or stands
between two attempts, with no attempt running, no write of the task's log in flight, no
command or signal handler running, and no cancel or operator's outcome to act on. The
work leaves a rest by `ContinueHere`; the attempt loop turns it into the carried point
(`TaskRunCarry`) and the run continues as new with it.

Runs from before this (no `task-run-continue-as-new-v1` marker) rest exactly as they
waited: the same conditions, the same timers, never continued.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Literal, Protocol

from temporalio import workflow

from weft.contract.tasks import CancelTask, CompleteTask, TaskCommand

# Asked once, at the run's first activation, by runs with the task commands.
CONTINUE_AS_NEW_PATCH = "task-run-continue-as-new-v1"


# Where the work stands: `task.queued` not yet written, waiting before `task.started`, or
# in the attempts.
Stage = Literal["waiting", "queued", "attempting"]


@dataclass(frozen=True)
class Resting:
    """Where the attempt loop's work rested when the run is to continue as new
    (`TaskRunCarry`'s part that is the attempt loop's)."""

    stage: Stage
    made: int
    retry_due: bool


class ContinueHere(Exception):
    """Raised out of a rest: the run continues as new from where its work rests."""


class RunEnding(Protocol):
    """What ends the run instead: a cancel, or an operator's outcome (the commands')."""

    @property
    def cancel(self) -> CancelTask | None: ...

    @property
    def verdict(self) -> tuple[str, CompleteTask | TaskCommand] | None: ...


class TaskContinuation:
    """Owns whether this run may continue as new, and after how many history events."""

    def __init__(self, ending: RunEnding) -> None:
        self._ending = ending
        self._enabled = False
        self._after_events = 0

    def begin(self, *, enabled: bool, after_events: int) -> None:
        """Set at the run's start: `enabled` when the run has the patch."""
        self._enabled = enabled
        self._after_events = after_events

    @property
    def enabled(self) -> bool:
        return self._enabled

    def due(self) -> bool:
        """Whether the history is long enough to continue as new (read where every replay
        reads the same: the history length is the activation's)."""
        if not self._enabled:
            return False
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= self._after_events
        )

    async def rest(self, until: Callable[[], bool], timeout: timedelta | None = None) -> None:
        """Wait for `until()` as `workflow.wait_condition` does (TimeoutError after
        `timeout`), at a point the run may continue as new from: ContinueHere when it is
        due there first. `until()` wins when both hold."""
        if not self._enabled:
            await workflow.wait_condition(until, timeout=timeout)
            return
        leave = False

        def woken() -> bool:
            # Decided when the condition is checked: by the time the work goes on, a
            # handler of the same activation may have changed what `until` reads (a pause
            # taken), and the run must not leave then.
            nonlocal leave
            if until():
                return True
            leave = self._may_leave()
            return leave

        await workflow.wait_condition(woken, timeout=timeout)
        if leave:
            raise ContinueHere

    async def checkpoint(self) -> None:
        """Between attempts: when the history is long, rest here until the run can
        continue as new (a cancel or an outcome meanwhile ends the run as usual)."""
        if self.due():
            await self.rest(lambda: False)

    def _may_leave(self) -> bool:
        """Due, no handler running (no command half done, no signal unprocessed), and
        nothing asking the run to end."""
        ending = self._ending
        return (
            self.due()
            and ending.cancel is None
            and ending.verdict is None
            and workflow.all_handlers_finished()
        )
