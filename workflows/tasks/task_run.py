"""`TaskRun`: one task's life on Temporal (docs/tasks.md).

It waits for the task's dependencies, then runs attempts: each starts the assignee agent
as an `AgentThread` child of its own, asks it the objective with `submit_turn` (wait
`completed`, from the `task.attempt` activity), and checks the acceptance criteria. An
accepted attempt completes the task; otherwise a new attempt, up to `maxAttempts`, then
`failed`. The deadline and `cancel_task` end it `timed_out` / `cancelled`, closing the
running attempt's thread. A retry of a finished task is a new run of this workflow (same
id) that continues the attempt numbering; the earlier attempts stay in the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, FailureError, is_cancelled_exception

from weft.contract.tasks import (
    ACTIVITY_TASK_ATTEMPT,
    ACTIVITY_TASK_DEPENDENCIES,
    ACTIVITY_TASK_DEPENDENTS,
    QUERY_TASK,
    SIGNAL_APPEND_PROGRESS,
    SIGNAL_CANCEL_TASK,
    SIGNAL_DEPENDENCY_SETTLED,
    TASK_WORKFLOW_TYPE,
    UNSUCCESSFUL_STATUSES,
    AttemptInput,
    AttemptResult,
    CancelTask,
    DependencyQuery,
    DependencyStates,
    TaskProgress,
    TaskRecord,
    TaskRunInput,
    attempt_end_event_id,
)
from weft.contract.thread import (
    SIGNAL_TERMINATE,
    WORKFLOW_TYPE,
    ThreadOptions,
    ThreadStartInput,
)
from weft.contract.validation import describe_validation_error
from weft.workflows.failures import failure_text
from weft.workflows.tasks.task_log import TaskLog, now_iso

INVALID_TASK_INPUT = "InvalidTaskRunInput"
_LOCAL = timedelta(seconds=30)
# A dependency's end is signalled; the store is read again this often in case a signal
# was lost (its sender's run ended before it could send). Each check adds a timer and a
# local activity to history (the run does not continue as new), so it is rare: about 170
# events a day of waiting.
_DEPENDENCY_RECHECK = timedelta(hours=1)
# The attempt activity waits for a whole turn; it heartbeats so a dead worker is noticed.
_ATTEMPT_HEARTBEAT = timedelta(seconds=30)
_ATTEMPT_LIMIT = timedelta(days=7)


@workflow.defn(name=TASK_WORKFLOW_TYPE)
class TaskRunWorkflow:
    """Run one task to a terminal status; returns the task as its log says."""

    def __init__(self) -> None:
        self._log: TaskLog | None = None
        self._cancel: CancelTask | None = None
        self._settled = 0
        self._thread_id: str | None = None

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
        log = self._log = TaskLog(start.task)
        if start.retry_reason is not None:
            await log.emit("task.retrying", {"reason": start.retry_reason})
        work = asyncio.ensure_future(self._work(log))
        try:
            await workflow.wait_condition(
                lambda: work.done() or self._cancel is not None, timeout=self._time_left(log)
            )
        except TimeoutError:
            await self._stop(log, work, "task.timed_out", "timed_out", "the task's deadline passed")
        else:
            if not work.done() and self._cancel is not None:
                await log.emit(
                    "task.cancel_requested", {"reason": self._cancel.reason or "cancelled"}
                )
                await self._stop(log, work, "task.cancelled", "cancelled", self._cancel.reason)
            else:
                await work
        await self._tell_dependents(log)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return log.record.model_dump(mode="json")

    # ---- handlers -------------------------------------------------------------------

    @workflow.query(name=QUERY_TASK)
    def task(self) -> dict[str, Any] | None:
        return self._log.record.model_dump(mode="json") if self._log else None

    @workflow.signal(name=SIGNAL_CANCEL_TASK)
    def cancel_task(self, raw: Any = None) -> None:
        try:
            self._cancel = CancelTask.model_validate(raw or {})
        except ValidationError:
            self._cancel = CancelTask(reason="cancelled (the request's reason was malformed)")

    @workflow.signal(name=SIGNAL_DEPENDENCY_SETTLED)
    def dependency_settled(self, _raw: Any = None) -> None:
        self._settled += 1

    @workflow.signal(name=SIGNAL_APPEND_PROGRESS)
    async def append_progress(self, raw: Any = None) -> None:
        try:
            entry = TaskProgress.model_validate(raw)
        except ValidationError as err:
            workflow.logger.warning("progress refused: %s", describe_validation_error(err))
            return
        if self._log is None or self._log.record.terminal:
            return
        entry = entry.model_copy(update={"at": entry.at or now_iso()})
        await self._log.emit("task.progress", {"progress": entry.model_dump(mode="json")})

    # ---- the work -------------------------------------------------------------------

    async def _work(self, log: TaskLog) -> None:
        await self._wait_for_dependencies(log)
        await log.emit("task.started", {})
        allowed = log.record.constraints.max_attempts
        for made in range(1, allowed + 1):
            result = await self._attempt(log)
            attempt = log.record.attempts[-1]  # the one just made
            if result.accepted and attempt.output is not None:
                await log.emit("task.completed", {"output": attempt.output.model_dump(mode="json")})
                return
            error = attempt.error or "the attempt failed"
            if made == allowed:
                await log.emit(
                    "task.failed", {"reason": f"{made} attempt(s) failed; last: {error}"}
                )
                return
            await log.emit("task.retrying", {"reason": error})

    async def _attempt(self, log: TaskLog) -> AttemptResult:
        task = log.record
        number = len(task.attempts) + 1
        attempt_id = f"{task.task_id}.a{number}"
        thread_id = f"{task.task_id}-a{number}"
        await log.emit(
            "task.attempt.started",
            {
                "attempt": {
                    "attemptId": attempt_id,
                    "number": number,
                    "runId": workflow.info().run_id,
                    "threadId": thread_id,
                    "startedAt": now_iso(),
                }
            },
            attempt_id=attempt_id,
        )
        try:
            result = await self._run_attempt(task, number, attempt_id, thread_id)
            log.fold(result.event)
        except FailureError as err:
            if is_cancelled_exception(err):
                raise  # the task is being cancelled or timed out: _stop ends the attempt
            # The thread could not start, or the attempt activity gave up: the attempt
            # failed, and the task goes on by its own rules rather than failing its run.
            event = _attempt_end(log, attempt_id, "failed", failure_text(err))
            await log.write(event)
            result = AttemptResult(event=event, accepted=False)
        await self._close_thread("its task attempt ended")
        return result

    async def _run_attempt(
        self, task: TaskRecord, number: int, attempt_id: str, thread_id: str
    ) -> AttemptResult:
        """Start the attempt's thread and run `task.attempt` on it."""
        options = ThreadOptions(budget=task.constraints.budget)
        child = ThreadStartInput(
            agent=task.assignee, session_id=task.scope.session_id, options=options
        )
        await workflow.start_child_workflow(
            WORKFLOW_TYPE,
            child.model_dump(mode="json", by_alias=True, exclude_none=True),
            id=thread_id,
            task_queue=workflow.info().task_queue,
            # Not TERMINATE: the task closes the thread itself with the soft terminate,
            # which records the thread's end; a hard termination would record nothing.
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            static_summary=f"{task.assignee} · attempt {number} of {task.task_id}",
        )
        self._thread_id = thread_id  # only a thread this task started is closed by it
        result: AttemptResult = await workflow.execute_activity(
            ACTIVITY_TASK_ATTEMPT,
            AttemptInput(
                task_id=task.task_id,
                attempt_id=attempt_id,
                run_id=workflow.info().run_id,
                thread_id=thread_id,
                objective=task.objective,
                acceptance=task.acceptance,
            ),
            result_type=AttemptResult,
            start_to_close_timeout=_ATTEMPT_LIMIT,
            heartbeat_timeout=_ATTEMPT_HEARTBEAT,
            retry_policy=RetryPolicy(maximum_attempts=10),
        )
        return result

    async def _wait_for_dependencies(self, log: TaskLog) -> None:
        dependencies = log.record.dependencies
        await log.emit("task.queued", {"waitingOn": dependencies})
        while dependencies:
            seen = self._settled
            states = await workflow.execute_local_activity(
                ACTIVITY_TASK_DEPENDENCIES,
                DependencyQuery(task_id=log.record.task_id, dependencies=dependencies),
                result_type=DependencyStates,
                start_to_close_timeout=_LOCAL,
            )
            open_ = [d for d in dependencies if states.statuses.get(d) != "completed"]
            if not open_:
                return
            failed = [d for d in open_ if states.statuses.get(d) in UNSUCCESSFUL_STATUSES]
            if failed and failed != log.record.blocked_by:
                reason = ", ".join(f"{d} {states.statuses[d]}" for d in failed)
                await log.emit(
                    "task.blocked", {"blockedBy": failed, "reason": f"dependency {reason}"}
                )
            elif not failed and log.record.status == "blocked":
                await log.emit("task.queued", {"waitingOn": open_})
            try:
                await workflow.wait_condition(
                    self._settled_since(seen), timeout=_DEPENDENCY_RECHECK
                )
            except TimeoutError:
                pass

    # ---- endings --------------------------------------------------------------------

    async def _stop(
        self,
        log: TaskLog,
        work: asyncio.Future[None],
        kind: str,
        attempt_status: str,
        reason: str | None,
    ) -> None:
        """End the task as `kind`: the running attempt's end first (so the attempt's own
        late outcome, written under the same event id, is not stored), then its thread."""
        work.cancel()
        attempt = log.record.current_attempt()
        events = []
        if attempt is not None and attempt.status == "running":
            events.append(_attempt_end(log, attempt.attempt_id, attempt_status, reason))
        events.append(log.event(kind, {"reason": reason or attempt_status}))
        await log.write(*events)
        await self._close_thread(f"its task ended {attempt_status}")

    async def _close_thread(self, reason: str) -> None:
        thread_id, self._thread_id = self._thread_id, None
        if thread_id is None:
            return
        try:
            await workflow.get_external_workflow_handle(thread_id).signal(
                SIGNAL_TERMINATE, {"reason": reason}
            )
        except Exception as err:  # a thread that already ended needs no closing
            workflow.logger.info("attempt thread %s not signalled: %s", thread_id, err)

    async def _tell_dependents(self, log: TaskLog) -> None:
        """Signal the unfinished tasks that depend on this one that it has ended."""
        dependents = await workflow.execute_local_activity(
            ACTIVITY_TASK_DEPENDENTS,
            log.record.task_id,
            result_type=list[str],
            start_to_close_timeout=_LOCAL,
        )
        for task_id in dependents:
            try:
                await workflow.get_external_workflow_handle(task_id).signal(
                    SIGNAL_DEPENDENCY_SETTLED, {"taskId": log.record.task_id}
                )
            except Exception as err:  # its run may have ended; it reads the store when retried
                workflow.logger.info("dependent %s not signalled: %s", task_id, err)

    def _settled_since(self, seen: int) -> Callable[[], bool]:
        """Whether a dependency has signalled its end since `seen` signals."""
        return lambda: self._settled != seen

    def _time_left(self, log: TaskLog) -> timedelta | None:
        """The deadline, counted from this run's start (creation, or a retry)."""
        seconds = log.record.constraints.deadline_seconds
        return None if seconds is None else timedelta(seconds=seconds)


def _attempt_end(log: TaskLog, attempt_id: str, status: str, error: str | None) -> dict[str, Any]:
    """An attempt's end written by the workflow, under the one id the attempt activity
    would write it under: whichever is stored first is the attempt's outcome."""
    ended = {"attemptId": attempt_id, "status": status, "endedAt": now_iso(), "error": error}
    event = log.event("task.attempt.failed", {"attempt": ended}, attempt_id=attempt_id)
    return {**event, "eventId": attempt_end_event_id(attempt_id)}
