"""`TaskRun`: one task's life on Temporal (docs/tasks.md).

It waits for the task's dependencies, then runs attempts: each starts the assignee agent
as an `AgentThread` child of its own, asks it the objective with `submit_turn` (wait
`completed`, from the `task.attempt` activity), and checks the acceptance criteria. An
accepted attempt completes the task; otherwise a new attempt, up to `maxAttempts`, then
`failed`. The deadline and `cancel_task` end it `timed_out` / `cancelled`, closing the
running attempt's thread. A retry of a finished task is a new run of this workflow (same
id) that continues the attempt numbering; the earlier attempts stay in the log.

The commands a task decides itself are updates, refused before history when its state
forbids them (`TASK_REFUSED`, naming the field): `start` (a task created with
`autoStart: false`), `update`, `delegate`, `link` / `unlink` (before its attempts start),
`pause` / `resume` (no new attempt while paused; a running one runs to its end),
`complete` / `fail` (an operator's outcome). An attempt whose worker stops heartbeating is
`lost`, and the next attempt follows by `maxAttempts`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    FailureError,
    TimeoutType,
    is_cancelled_exception,
)
from temporalio.exceptions import TimeoutError as TemporalTimeout

from weft.contract.tasks import (
    ACTIVITY_TASK_ATTEMPT,
    ACTIVITY_TASK_DEPENDENCIES,
    ACTIVITY_TASK_DEPENDENTS,
    ACTIVITY_TASK_LINK,
    ACTIVITY_TASK_LOSE,
    QUERY_TASK,
    SIGNAL_APPEND_PROGRESS,
    SIGNAL_CANCEL_TASK,
    SIGNAL_DEPENDENCY_SETTLED,
    TASK_REFUSED,
    TASK_WORKFLOW_TYPE,
    UNSUCCESSFUL_STATUSES,
    UPDATE_COMPLETE_TASK,
    UPDATE_DELEGATE_TASK,
    UPDATE_FAIL_TASK,
    UPDATE_LINK_TASKS,
    UPDATE_PAUSE_TASK,
    UPDATE_RESUME_TASK,
    UPDATE_START_TASK,
    UPDATE_UNLINK_TASKS,
    UPDATE_UPDATE_TASK,
    AttemptInput,
    AttemptResult,
    CancelTask,
    CompleteTask,
    DelegateTask,
    DependencyQuery,
    DependencyStates,
    LinkResult,
    LinkTasks,
    LoseAttempt,
    LostResult,
    TaskChanges,
    TaskCommand,
    TaskEventsInput,
    TaskOutput,
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
from weft.contract.wire import CamelModel
from weft.workflows.failures import failure_text
from weft.workflows.tasks.task_log import TaskLog, now_iso

INVALID_TASK_INPUT = "InvalidTaskRunInput"
# Asked once, at the run's first activation: runs from before the task commands keep their
# commands (the attempt's retry policy, writes one at a time, `task.lose`).
TASK_COMMANDS_PATCH = "task-commands-v1"
_LOCAL = timedelta(seconds=30)
# A dependency's end is signalled; the store is read again this often in case a signal
# was lost (its sender's run ended before it could send). Each check adds a timer and a
# local activity to history (the run does not continue as new), so it is rare: about 170
# events a day of waiting.
_DEPENDENCY_RECHECK = timedelta(hours=1)
# The attempt activity waits for a whole turn; it heartbeats so a dead worker is noticed
# (a run with the task commands takes the task's `lostAfterSeconds`).
_ATTEMPT_HEARTBEAT = timedelta(seconds=30)
_M = TypeVar("_M", bound=CamelModel)
_ATTEMPT_LIMIT = timedelta(days=7)


@workflow.defn(name=TASK_WORKFLOW_TYPE)
class TaskRunWorkflow:
    """Run one task to a terminal status; returns the task as its log says."""

    def __init__(self) -> None:
        self._log: TaskLog | None = None
        self._cancel: CancelTask | None = None
        self._settled = 0
        self._thread_id: str | None = None
        self._commands = False
        self._started = False  # task.started written in this run: attempts have begun
        self._start: TaskCommand | None = None
        self._paused_from: str | None = None  # the status before `pause`; None: not paused
        self._verdict: tuple[str, CompleteTask | TaskCommand] | None = None
        self._deadline_moves = 0
        self._wakes = 0  # resumes and edge changes: the dependency wait looks again
        self._completed: set[str] = set()  # dependencies last seen completed

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
        log = self._log = TaskLog(start.task, ordered=self._commands)
        if start.retry_reason is not None:
            await log.emit("task.retrying", {"reason": start.retry_reason})
        work = asyncio.ensure_future(self._work(log))
        began = workflow.now()
        timed_out = False
        while True:
            moves = self._deadline_moves
            try:
                await workflow.wait_condition(
                    self._run_wakes(work, moves), timeout=self._time_left(log, began)
                )
            except TimeoutError:
                timed_out = True
                break
            if work.done() or self._deadline_moves == moves:
                break
        if timed_out:
            await self._stop(log, work, "task.timed_out", "timed_out", "the task's deadline passed")
        elif work.done():
            await work
        elif self._verdict is not None:
            await self._decide(log, work, *self._verdict)
        elif self._cancel is not None:
            await log.emit("task.cancel_requested", {"reason": self._cancel.reason or "cancelled"})
            await self._stop(log, work, "task.cancelled", "cancelled", self._cancel.reason)
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

    # ---- commands (updates) ---------------------------------------------------------

    @workflow.update(name=UPDATE_START_TASK)
    async def start_task(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        self._check_start(raw)  # the validator may have run before the run began
        self._start = _parse(TaskCommand, raw)
        return self._open().record.model_dump(mode="json")

    @start_task.validator
    def _check_start(self, raw: Any = None) -> None:
        _parse(TaskCommand, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        log = self._open()
        if log.record.auto_start or self._start is not None:
            _refuse(f"task {log.record.task_id} was started already")

    @workflow.update(name=UPDATE_UPDATE_TASK)
    async def update_task(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        changes = _parse(TaskChanges, raw)
        log = self._open()
        async with log.turn():
            self._before_attempts("changed")
            await log.write_in_turn(
                log.event("task.updated", {"changes": changes.changes(), **_who(changes)})
            )
        if changes.constraints is not None:
            self._deadline_moves += 1
        return log.record.model_dump(mode="json")

    @update_task.validator
    def _check_update(self, raw: Any = None) -> None:
        if not _parse(TaskChanges, raw).changes():
            _refuse("nothing to change: give objective, constraints or acceptance", "body")
        if self._log is not None:
            self._before_attempts("changed")

    @workflow.update(name=UPDATE_DELEGATE_TASK)
    async def delegate_task(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        command = _parse(DelegateTask, raw)
        log = self._open()
        async with log.turn():
            self._before_attempts("delegated")
            payload = {"to": command.to, "from": log.record.assignee, **_who(command)}
            await log.write_in_turn(log.event("task.delegated", payload))
        return log.record.model_dump(mode="json")

    @delegate_task.validator
    def _check_delegate(self, raw: Any = None) -> None:
        _parse(DelegateTask, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        self._before_attempts("delegated")

    @workflow.update(name=UPDATE_LINK_TASKS)
    async def link_tasks(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        return await self._change_edge(_parse(LinkTasks, raw), "added")

    @link_tasks.validator
    def _check_link(self, raw: Any = None) -> None:
        _parse(LinkTasks, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        self._before_attempts("linked to a dependency")

    @workflow.update(name=UPDATE_UNLINK_TASKS)
    async def unlink_tasks(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        return await self._change_edge(_parse(LinkTasks, raw), "removed")

    @unlink_tasks.validator
    def _check_unlink(self, raw: Any = None) -> None:
        _parse(LinkTasks, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        self._before_attempts("unlinked from a dependency")

    @workflow.update(name=UPDATE_PAUSE_TASK)
    async def pause_task(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        self._check_pause(raw)  # the validator may have run before the run began
        command = _parse(TaskCommand, raw)
        log = self._open()
        async with log.turn():
            self._check_pause(raw)  # again in turn: the task may have ended meanwhile
            self._paused_from = log.record.status
            await log.write_in_turn(log.event("task.paused", _who(command)))
        return log.record.model_dump(mode="json")

    @pause_task.validator
    def _check_pause(self, raw: Any = None) -> None:
        _parse(TaskCommand, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        log = self._open()
        if self._paused_from is not None:
            _refuse(f"task {log.record.task_id} is paused already")

    @workflow.update(name=UPDATE_RESUME_TASK)
    async def resume_task(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        self._check_resume(raw)  # the validator may have run before the run began
        command = _parse(TaskCommand, raw)
        log = self._open()
        async with log.turn():
            self._check_resume(raw)  # again in turn: the task may have ended meanwhile
            status = self._resumed_status(log)
            await log.write_in_turn(log.event("task.resumed", {"status": status, **_who(command)}))
            self._paused_from = None  # after the event: no attempt is recorded before it
        self._wakes += 1
        return log.record.model_dump(mode="json")

    @resume_task.validator
    def _check_resume(self, raw: Any = None) -> None:
        _parse(TaskCommand, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        log = self._open()
        if self._paused_from is None:
            _refuse(f"task {log.record.task_id} is {log.record.status}, not paused")

    @workflow.update(name=UPDATE_COMPLETE_TASK)
    async def complete_task(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        return await self._conclude("completed", _parse(CompleteTask, raw))

    @complete_task.validator
    def _check_complete(self, raw: Any = None) -> None:
        _parse(CompleteTask, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        self._open()

    @workflow.update(name=UPDATE_FAIL_TASK)
    async def fail_task(self, raw: Any = None) -> dict[str, Any]:
        await self._ready()
        return await self._conclude("failed", _parse(TaskCommand, raw))

    @fail_task.validator
    def _check_fail(self, raw: Any = None) -> None:
        _parse(TaskCommand, raw)
        if self._log is None:
            return  # the run has not begun: the handler waits for it and checks
        self._open()

    async def _ready(self) -> None:
        """Wait for the run to begin: a command can arrive with the run's first activation,
        before `run` has read its input (its validator let it through unchecked)."""
        await workflow.wait_condition(lambda: self._log is not None)

    def _open(self) -> TaskLog:
        """The task's log while the task can still change; refused once it is ending."""
        log = self._log
        if log is None:
            _refuse("the task's run has not begun yet; try again")
        ending = self._cancel is not None or self._verdict is not None
        if log.record.terminal or ending:
            _refuse(f"task {log.record.task_id} is {'ending' if ending else log.record.status}")
        return log

    def _before_attempts(self, verb: str) -> None:
        """Refused once the task's attempts have started in this run."""
        log = self._open()
        if self._started:
            _refuse(
                f"task {log.record.task_id} is {log.record.status}: a task is {verb} only "
                "before its attempts start"
            )

    async def _change_edge(self, command: LinkTasks, change: str) -> dict[str, Any]:
        """Add or remove a dependency edge: checked against the whole graph and stored in
        one store transaction (`task.link`), so no two links can close a cycle."""
        log = self._open()
        payload = {"dependsOn": command.depends_on, "change": change, **_who(command)}
        async with log.turn():
            self._before_attempts("linked or unlinked")
            [event] = log.stated(log.event("task.dependency.updated", payload))
            result = await workflow.execute_local_activity(
                ACTIVITY_TASK_LINK,
                TaskEventsInput(events=[event]),
                result_type=LinkResult,
                start_to_close_timeout=_LOCAL,
            )
            if result.refused is not None:
                _refuse(result.refused, result.field)
            log.fold(event)
        self._wakes += 1
        return log.record.model_dump(mode="json")

    async def _conclude(self, status: str, command: CompleteTask | TaskCommand) -> dict[str, Any]:
        """An operator's outcome: the run ends with it, and the update answers once the
        task has ended (with it, or with the outcome that was already being written)."""
        log = self._open()
        self._verdict = (status, command)
        await workflow.wait_condition(lambda: log.record.terminal)
        return log.record.model_dump(mode="json")

    def _resumed_status(self, log: TaskLog) -> str:
        """The status a resumed task returns to: running with its attempt, retrying once
        its attempts began, else where it waited (accepted, queued, blocked)."""
        attempt = log.record.current_attempt()
        if attempt is not None and attempt.status == "running":
            return "running"
        if self._started:
            return "retrying"
        return self._paused_from or "queued"

    async def _gate(self) -> None:
        """Wait while the task is paused: no new attempt starts."""
        await workflow.wait_condition(lambda: self._paused_from is None)

    # ---- the work -------------------------------------------------------------------

    async def _work(self, log: TaskLog) -> None:
        if not log.record.auto_start:
            await workflow.wait_condition(lambda: self._start is not None)
        if self._commands:
            await self._gate()  # a task paused before it was started is queued on resume
        await self._wait_for_dependencies(log)
        if self._commands:
            await self._begin(log)
        else:
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
            if self._commands:
                await self._gate()
            await log.emit("task.retrying", {"reason": error})

    async def _begin(self, log: TaskLog) -> None:
        """`task.started`, once not paused and every dependency (links made meanwhile
        included) has completed: checked and written in one turn, so a link cannot slip
        in between."""
        while True:
            await self._gate()
            async with log.turn():
                if self._paused_from is None and set(log.record.dependencies) <= self._completed:
                    self._started = True
                    await log.write_in_turn(log.event("task.started", {}))
                    return
            await self._wait_for_dependencies(log, announce=False)

    async def _start_attempt(self, log: TaskLog, started: dict[str, Any], attempt_id: str) -> None:
        """`task.attempt.started`, checked not paused in the turn that writes it: a pause
        that came in while the task was being written to starts no attempt."""
        while True:
            await self._gate()
            async with log.turn():
                if self._paused_from is None:
                    started["attempt"]["startedAt"] = now_iso()
                    event = log.event("task.attempt.started", started, attempt_id=attempt_id)
                    await log.write_in_turn(event)
                    return

    async def _attempt(self, log: TaskLog) -> AttemptResult:
        task = log.record
        number = len(task.attempts) + 1
        attempt_id = f"{task.task_id}.a{number}"
        thread_id = f"{task.task_id}-a{number}"
        started = {
            "attempt": {
                "attemptId": attempt_id,
                "number": number,
                "runId": workflow.info().run_id,
                "threadId": thread_id,
                "startedAt": now_iso(),
            }
        }
        if self._commands:
            await self._start_attempt(log, started, attempt_id)
        else:
            await log.emit("task.attempt.started", started, attempt_id=attempt_id)
        try:
            result = await self._run_attempt(task, number, attempt_id, thread_id)
            log.fold(result.event)
        except FailureError as err:
            if is_cancelled_exception(err):
                raise  # the task is being cancelled or timed out: _stop ends the attempt
            if self._commands and _worker_lost(err):
                result = await self._lose(log, attempt_id, err)
            else:
                # The thread could not start, or the attempt activity gave up: the attempt
                # failed, and the task goes on by its own rules rather than failing its run.
                event = _attempt_end(log, attempt_id, "failed", failure_text(err))
                await log.write(event)
                result = AttemptResult(event=event, accepted=False)
        await self._close_thread("its task attempt ended")
        return result

    async def _lose(self, log: TaskLog, attempt_id: str, err: FailureError) -> AttemptResult:
        """The attempt's worker stopped heartbeating: Temporal timed the activity out, so
        nothing proves the worker alive. The attempt ends `lost` with `task.lost` (naming
        the worker, from the history), unless its end was stored first (then that end is
        its outcome)."""
        seconds = log.record.constraints.lost_after_seconds
        end = _attempt_end(log, attempt_id, "lost", "lost")
        lost = log.event("task.lost", {"reason": "lost"}, attempt_id=attempt_id)
        started = err.started_event_id if isinstance(err, ActivityError) else None
        async with log.turn():
            outcome = await workflow.execute_local_activity(
                ACTIVITY_TASK_LOSE,
                LoseAttempt(
                    events=log.stated(end, lost),
                    started_event_id=started or None,
                    silent_seconds=seconds,
                ),
                result_type=LostResult,
                start_to_close_timeout=_LOCAL,
            )
            if outcome.stored_end is not None:
                log.fold(outcome.stored_end)
                accepted = outcome.stored_end.get("type") == "task.attempt.completed"
                return AttemptResult(event=outcome.stored_end, accepted=accepted)
            for event in outcome.recorded:
                log.fold(event)
        return AttemptResult(event=outcome.recorded[0], accepted=False)

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
            # With the commands, a timed-out heartbeat is not retried on the same turn: the
            # attempt is lost and the task's own policy makes the next one (`_lose`).
            heartbeat_timeout=timedelta(seconds=task.constraints.lost_after_seconds)
            if self._commands
            else _ATTEMPT_HEARTBEAT,
            retry_policy=RetryPolicy(maximum_attempts=1 if self._commands else 10),
        )
        return result

    async def _wait_for_dependencies(self, log: TaskLog, *, announce: bool = True) -> None:
        if announce:
            queued: dict[str, Any] = {"waitingOn": log.record.dependencies}
            if self._start is not None:
                queued |= {"startedBy": self._start.by or "operator"}
                queued |= {"reason": self._start.reason} if self._start.reason else {}
            await log.emit("task.queued", queued)
        while dependencies := log.record.dependencies:
            if self._commands:
                await self._gate()
            seen = self._settled + self._wakes
            states = await workflow.execute_local_activity(
                ACTIVITY_TASK_DEPENDENCIES,
                DependencyQuery(task_id=log.record.task_id, dependencies=dependencies),
                result_type=DependencyStates,
                start_to_close_timeout=_LOCAL,
            )
            open_ = [d for d in dependencies if states.statuses.get(d) != "completed"]
            self._completed = {d for d in dependencies if d not in open_}
            if not open_:
                return
            failed = [d for d in open_ if states.statuses.get(d) in UNSUCCESSFUL_STATUSES]
            if self._paused_from is not None:
                pass  # paused: the status stays `paused`; looked at again on resume
            elif failed and failed != log.record.blocked_by:
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
        _abandon(work)
        async with log.turn():
            if self._commands and log.record.terminal:
                return  # the work wrote its own ending first
            attempt = log.record.current_attempt()
            events = []
            if attempt is not None and attempt.status == "running":
                events.append(_attempt_end(log, attempt.attempt_id, attempt_status, reason))
            events.append(log.event(kind, {"reason": reason or attempt_status}))
            await log.write_in_turn(*events)
        await self._close_thread(f"its task ended {attempt_status}")

    async def _decide(
        self, log: TaskLog, work: asyncio.Future[None], status: str, command: TaskCommand
    ) -> None:
        """End the task with an operator's outcome: the running attempt ends `cancelled`
        (its own late outcome is then not stored), then its thread is closed."""
        _abandon(work)
        by = command.by or "operator"
        async with log.turn():
            if log.record.terminal:
                return  # the work wrote its own ending first; the update answers with it
            events = []
            attempt = log.record.current_attempt()
            if attempt is not None and attempt.status == "running":
                why = f"the task was {status} by {by}"
                events.append(_attempt_end(log, attempt.attempt_id, "cancelled", why))
            payload: dict[str, Any] = {"by": by}
            if command.reason:
                payload["reason"] = command.reason
            if isinstance(command, CompleteTask):
                output = TaskOutput(response=command.response, structured=command.structured)
                payload["output"] = output.model_dump(mode="json")
            else:
                payload.setdefault("reason", f"failed by {by}")
            events.append(log.event(f"task.{status}", payload))
            await log.write_in_turn(*events)
        await self._close_thread(f"its task was {status} by {by}")

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

    def _run_wakes(self, work: asyncio.Future[None], moves: int) -> Callable[[], bool]:
        """Whether the run has something to do: the work ended, a cancel or an operator's
        outcome came, or the deadline moved since `moves`."""
        return lambda: (
            work.done()
            or self._cancel is not None
            or self._verdict is not None
            or self._deadline_moves != moves
        )

    def _settled_since(self, seen: int) -> Callable[[], bool]:
        """Whether a dependency has signalled its end (or the task was resumed, or its
        edges changed) since `seen`."""
        return lambda: self._settled + self._wakes != seen

    def _time_left(self, log: TaskLog, began: datetime) -> timedelta | None:
        """The deadline, counted from this run's start (creation, or a retry); an update
        of the constraints moves it."""
        seconds = log.record.constraints.deadline_seconds
        if seconds is None:
            return None
        left = timedelta(seconds=seconds) - (workflow.now() - began)
        return max(left, timedelta(milliseconds=1))


def _abandon(work: asyncio.Future[None]) -> None:
    """Cancel the work the run ends without; its cancellation is expected, and retrieved
    so that it is not reported as an error nobody saw."""
    work.cancel()
    work.add_done_callback(lambda done: done.cancelled() or done.exception())


def _parse(model: type[_M], raw: Any) -> _M:
    """A command's payload; refused naming the field that is wrong."""
    try:
        return model.model_validate(raw or {})
    except ValidationError as err:
        field = ".".join(str(p) for p in err.errors()[0]["loc"]) or "body"
        _refuse(f"invalid command: {describe_validation_error(err)}", field)


def _refuse(message: str, field: str | None = None) -> NoReturn:
    """Refuse a command: the client raises TaskError(message, field=field)."""
    raise ApplicationError(message, field, type=TASK_REFUSED, non_retryable=True)


def _who(command: TaskCommand) -> dict[str, Any]:
    """Who asked and why, for the event's payload (only what was given)."""
    return command.model_dump(mode="json", include={"by", "reason"}, exclude_none=True)


def _worker_lost(err: FailureError) -> bool:
    """Whether the attempt activity timed out on its heartbeat: its worker is not known
    to be alive (killed, partitioned, stalled)."""
    cause = err.cause
    return (
        isinstance(err, ActivityError)
        and isinstance(cause, TemporalTimeout)
        and cause.type == TimeoutType.HEARTBEAT
    )


def _attempt_end(log: TaskLog, attempt_id: str, status: str, error: str | None) -> dict[str, Any]:
    """An attempt's end written by the workflow, under the one id the attempt activity
    would write it under: whichever is stored first is the attempt's outcome."""
    ended = {"attemptId": attempt_id, "status": status, "endedAt": now_iso(), "error": error}
    event = log.event("task.attempt.failed", {"attempt": ended}, attempt_id=attempt_id)
    return {**event, "eventId": attempt_end_event_id(attempt_id)}
