"""`TaskRun`: one task's life on Temporal (docs/tasks.md).

It waits for the task's dependencies, then runs attempts, each the assignee agent in an
`AgentThread` child of its own, until one is accepted (`completed`) or `maxAttempts` are
spent (`failed`). The deadline and `cancel_task` end it `timed_out` / `cancelled`, closing
the running attempt's thread. A retry of a finished task is a new run of this workflow
(same id) that continues the attempt numbering; the earlier attempts stay in the log.

The workflow holds the Temporal handlers and the run's lifecycle, and composes four
parts, each owning its state: `TaskControls` (`task_controls.py`: the commands and their
checks), `DependencyWait` (`task_dependencies.py`: waiting for dependencies, telling
dependents), `AttemptLoop` (`task_attempts.py`: the attempts and the run's endings) and
`TaskContinuation` (`task_continuation.py`: when the run continues as new, from which of
the work's rests). Each takes a narrow view of the others (`task_views.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NoReturn

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from weft.contract.tasks import (
    QUERY_TASK,
    SIGNAL_APPEND_PROGRESS,
    SIGNAL_CANCEL_TASK,
    SIGNAL_DEPENDENCY_SETTLED,
    TASK_WORKFLOW_TYPE,
    UPDATE_COMPLETE_TASK,
    UPDATE_DELEGATE_TASK,
    UPDATE_FAIL_TASK,
    UPDATE_LINK_TASKS,
    UPDATE_PAUSE_TASK,
    UPDATE_RESUME_TASK,
    UPDATE_START_TASK,
    UPDATE_UNLINK_TASKS,
    UPDATE_UPDATE_TASK,
    TaskRunCarry,
    TaskRunInput,
)
from weft.contract.validation import describe_validation_error
from weft.workflows.tasks.task_attempts import AttemptLoop
from weft.workflows.tasks.task_continuation import (
    CONTINUE_AS_NEW_PATCH,
    Resting,
    TaskContinuation,
)
from weft.workflows.tasks.task_controls import TaskControls
from weft.workflows.tasks.task_dependencies import DependencyWait
from weft.workflows.tasks.task_log import TaskLog

INVALID_TASK_INPUT = "InvalidTaskRunInput"
# Asked once, at the run's first activation: runs from before the task commands keep their
# commands (the attempt's retry policy, writes one at a time, `task.lose`).
TASK_COMMANDS_PATCH = "task-commands-v1"
# Asked once, at the run's first activation: a run cancelled through Temporal (its UI or
# CLI) ends as `cancel_task` ends it; older runs ended CANCELED and replay so.
TEMPORAL_CANCEL_PATCH = "task-temporal-cancel-v1"
# The longest reason a cancel carries into the task's log (`CancelTask.reason`).
_REASON_LIMIT = 4096


@workflow.defn(name=TASK_WORKFLOW_TYPE)
class TaskRunWorkflow:
    """Run one task to a terminal status; returns the task as its log says (with the
    progress entries of this run only, after a continue-as-new: the store has them all)."""

    def __init__(self) -> None:
        self._log: TaskLog | None = None
        self._commands = False
        self._controls = TaskControls(self)
        self._continuation = TaskContinuation(self._controls)
        self._dependencies = DependencyWait(self, self._controls)
        self._attempts = AttemptLoop(self, self._controls, self._dependencies)

    # ---- what the parts read of the run (`task_views.RunFacts`, `ControlHost`) ------

    @property
    def log(self) -> TaskLog | None:
        return self._log

    @property
    def commands(self) -> bool:
        return self._commands

    @property
    def continues(self) -> bool:
        return self._continuation.enabled

    @property
    def attempts_started(self) -> bool:
        return self._attempts.started

    async def rest(self, until: Callable[[], bool], timeout: timedelta | None = None) -> None:
        await self._continuation.rest(until, timeout)

    async def checkpoint(self) -> None:
        await self._continuation.checkpoint()

    # ---- the run --------------------------------------------------------------------

    @workflow.run
    async def run(self, raw: Any = None) -> dict[str, Any]:
        try:
            start = TaskRunInput.model_validate(raw)
        except ValidationError as err:
            # Validated here, not by the converter: a decode failure there would fail the
            # workflow task forever instead of ending this run with the reason.
            raise ApplicationError(
                f"invalid TaskRun input: {describe_validation_error(err)}",
                type=INVALID_TASK_INPUT,
                non_retryable=True,
            ) from None
        self._commands = workflow.patched(TASK_COMMANDS_PATCH)
        ends_own_cancel = workflow.patched(TEMPORAL_CANCEL_PATCH)
        self._continuation.begin(
            enabled=self._commands and workflow.patched(CONTINUE_AS_NEW_PATCH),
            after_events=start.continue_after_events,
        )
        self._attempts.begin(start.task)  # asks its patch here, at the first activation
        log = self._log = TaskLog(start.task, ordered=self._commands)
        carried = start.carried
        if carried is not None:
            self._controls.restore(carried.start, carried.paused_from)
        elif start.retry_reason is not None:
            await log.emit("task.retrying", {"reason": start.retry_reason})
        controls, attempts = self._controls, self._attempts
        work = asyncio.ensure_future(attempts.work(log, carried))
        began = datetime.fromisoformat(carried.began) if carried else workflow.now()
        timed_out = False
        while True:
            moves = controls.deadline_moves
            try:
                await workflow.wait_condition(
                    self._run_wakes(work, moves), timeout=self._time_left(log, began)
                )
            except TimeoutError:
                timed_out = True
                break
            except asyncio.CancelledError:
                # Cancelled through Temporal, not `cancel_task`: ended as that cancel ends
                # it, so the attempt's thread is closed now (it was started ABANDON) and
                # the run returns its record to its parent (a job) instead of failing it.
                if not ends_own_cancel:
                    raise
                if controls.cancel is None:
                    controls.on_cancel({"reason": _temporal_cancel_reason()})
                break
            if work.done() or controls.deadline_moves == moves:
                break
        if timed_out:
            await attempts.stop(
                log, work, "task.timed_out", "timed_out", "the task's deadline passed"
            )
        elif work.done():
            resting = await work
            if resting is not None:
                self._continue_as_new(start, log, resting, began)
        elif controls.verdict is not None:
            await attempts.decide(log, work, *controls.verdict)
        elif controls.cancel is not None:
            reason = controls.cancel.reason
            await log.emit("task.cancel_requested", {"reason": reason or "cancelled"})
            await attempts.stop(log, work, "task.cancelled", "cancelled", reason)
        await self._dependencies.tell_dependents(log)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return log.record.model_dump(mode="json")

    def _continue_as_new(
        self, start: TaskRunInput, log: TaskLog, resting: Resting, began: datetime
    ) -> NoReturn:
        """Continue as new from where the work rests (it left its rest in this activation,
        with no handler running and nothing ending the run): the task without its
        progress entries (the store has them; the run needs none) and the point."""
        controls = self._controls
        carried = TaskRunCarry(
            stage=resting.stage,
            began=began.isoformat(),
            made=resting.made,
            retry_due=resting.retry_due,
            start=controls.start,
            paused_from=controls.paused_from,
        )
        task = log.record.model_copy(update={"progress": []})
        workflow.continue_as_new(
            TaskRunInput(
                task=task,
                carried=carried,
                continue_after_events=start.continue_after_events,
            ).model_dump(mode="json")
        )

    def _run_wakes(self, work: asyncio.Future[Resting | None], moves: int) -> Callable[[], bool]:
        """Whether the run has something to do: the work ended, a cancel or an operator's
        outcome came, or the deadline moved since `moves`."""
        controls = self._controls
        return lambda: (
            work.done()
            or controls.cancel is not None
            or controls.verdict is not None
            or controls.deadline_moves != moves
        )

    def _time_left(self, log: TaskLog, began: datetime) -> timedelta | None:
        """The deadline, counted from this run's start (creation, or a retry); an update
        of the constraints moves it."""
        seconds = log.record.constraints.deadline_seconds
        if seconds is None:
            return None
        left = timedelta(seconds=seconds) - (workflow.now() - began)
        return max(left, timedelta(milliseconds=1))

    # ---- queries and signals --------------------------------------------------------

    @workflow.query(name=QUERY_TASK)
    def task(self) -> dict[str, Any] | None:
        return self._log.record.model_dump(mode="json") if self._log else None

    @workflow.signal(name=SIGNAL_CANCEL_TASK)
    def cancel_task(self, raw: Any = None) -> None:
        self._controls.on_cancel(raw)

    @workflow.signal(name=SIGNAL_DEPENDENCY_SETTLED)
    def dependency_settled(self, _raw: Any = None) -> None:
        self._dependencies.on_settled()

    @workflow.signal(name=SIGNAL_APPEND_PROGRESS)
    async def append_progress(self, raw: Any = None) -> None:
        await self._controls.append_progress(raw)

    # ---- commands: updates, each refused by its validator before history ----------

    @workflow.update(name=UPDATE_START_TASK)
    async def start_task(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.start_task(raw)

    @start_task.validator
    def _check_start(self, raw: Any = None) -> None:
        self._controls.check_start(raw)

    @workflow.update(name=UPDATE_UPDATE_TASK)
    async def update_task(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.update_task(raw)

    @update_task.validator
    def _check_update(self, raw: Any = None) -> None:
        self._controls.check_update(raw)

    @workflow.update(name=UPDATE_DELEGATE_TASK)
    async def delegate_task(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.delegate_task(raw)

    @delegate_task.validator
    def _check_delegate(self, raw: Any = None) -> None:
        self._controls.check_delegate(raw)

    @workflow.update(name=UPDATE_LINK_TASKS)
    async def link_tasks(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.link_tasks(raw)

    @link_tasks.validator
    def _check_link(self, raw: Any = None) -> None:
        self._controls.check_link(raw)

    @workflow.update(name=UPDATE_UNLINK_TASKS)
    async def unlink_tasks(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.unlink_tasks(raw)

    @unlink_tasks.validator
    def _check_unlink(self, raw: Any = None) -> None:
        self._controls.check_unlink(raw)

    @workflow.update(name=UPDATE_PAUSE_TASK)
    async def pause_task(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.pause_task(raw)

    @pause_task.validator
    def _check_pause(self, raw: Any = None) -> None:
        self._controls.check_pause(raw)

    @workflow.update(name=UPDATE_RESUME_TASK)
    async def resume_task(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.resume_task(raw)

    @resume_task.validator
    def _check_resume(self, raw: Any = None) -> None:
        self._controls.check_resume(raw)

    @workflow.update(name=UPDATE_COMPLETE_TASK)
    async def complete_task(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.complete_task(raw)

    @complete_task.validator
    def _check_complete(self, raw: Any = None) -> None:
        self._controls.check_complete(raw)

    @workflow.update(name=UPDATE_FAIL_TASK)
    async def fail_task(self, raw: Any = None) -> dict[str, Any]:
        return await self._controls.fail_task(raw)

    @fail_task.validator
    def _check_fail(self, raw: Any = None) -> None:
        self._controls.check_fail(raw)


def _temporal_cancel_reason() -> str:
    """The task's end reason for a cancel through Temporal, with the reason it was given."""
    given = workflow.cancellation_reason()
    said = f": {given}" if given else ""
    return f"its run was cancelled through Temporal{said}"[:_REASON_LIMIT]
