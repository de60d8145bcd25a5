"""A task's attempts, from its start to its end (docs/tasks.md).

Once started and its dependencies completed, the task runs attempts: each starts the
assignee agent as an `AgentThread` child of its own (or, for a task with `runIn`, uses
the given thread, which it never closes), asks it the objective with
`submit_turn` (wait `completed`, from the `task.attempt` activity), and checks the
acceptance criteria. An accepted attempt completes the task; otherwise a new attempt, up
to `maxAttempts`, then `failed`. An attempt whose worker stops heartbeating is `lost`. The
run's other endings (deadline, cancel, an operator's outcome) end the running attempt and
close its thread here too. The loop knows where it stands (its stage, the attempts made),
so a run that continued as new from one of its rests takes up from there.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import (
    ActivityError,
    FailureError,
    TimeoutType,
    is_cancelled_exception,
)
from temporalio.exceptions import TimeoutError as TemporalTimeout

from weft.contract.tasks import (
    ACTIVITY_TASK_ATTEMPT,
    ACTIVITY_TASK_LOSE,
    AttemptInput,
    AttemptResult,
    CompleteTask,
    LoseAttempt,
    LostResult,
    TaskCommand,
    TaskOutput,
    TaskRecord,
    TaskRunCarry,
    attempt_end_event_id,
)
from weft.contract.thread import (
    SIGNAL_TERMINATE,
    WORKFLOW_TYPE,
    ThreadOptions,
    ThreadStartInput,
)
from weft.workflows.failures import failure_text
from weft.workflows.search_attributes import start_attributes
from weft.workflows.tasks.task_continuation import ContinueHere, Resting, Stage
from weft.workflows.tasks.task_log import LOCAL_TIMEOUT, TaskLog, now_iso
from weft.workflows.tasks.task_views import RunFacts

# The attempt activity waits for a whole turn; it heartbeats so a dead worker is noticed
# (a run with the task commands takes the task's `lostAfterSeconds`).
_ATTEMPT_HEARTBEAT = timedelta(seconds=30)
_ATTEMPT_LIMIT = timedelta(days=7)

# Asked at a run's first activation, only by a task whose attempts run in a given thread
# (`runIn`): a run of a task without it never asks, so older histories replay as recorded.
RUN_IN_THREAD_PATCH = "task-run-in-thread-v1"
# Attempt threads start with cancellation ABANDON: the task's soft terminate closes them.
ABANDON_THREAD_PATCH = "task-thread-abandon-v1"
_CANCEL = workflow.ChildWorkflowCancellationType


class AttemptControls(Protocol):
    """What the attempts read of the commands: the start of a held task and the pause."""

    @property
    def start(self) -> TaskCommand | None: ...

    @property
    def paused_from(self) -> str | None: ...

    async def gate(self) -> None: ...


class Dependencies(Protocol):
    """The dependency wait, and the dependencies it last saw completed."""

    @property
    def completed(self) -> set[str]: ...

    async def wait(self, log: TaskLog, *, announce: bool = True) -> None: ...


class AttemptLoop:
    """Owns where the work stands (its stage, the attempts this run of the task made,
    whether the attempts have begun) and the running attempt's thread."""

    def __init__(self, run: RunFacts, controls: AttemptControls, dependencies: Dependencies):
        self._run = run
        self._controls = controls
        self._dependencies = dependencies
        self._thread_id: str | None = None
        # The thread the attempts run as turns of (`runIn`); None: each starts its own.
        self._given_thread: str | None = None
        self._thread_cancellation = _CANCEL.WAIT_CANCELLATION_COMPLETED
        self.started = False  # task.started written in this run: attempts have begun
        self._stage: Stage = "waiting"
        self._made = 0  # attempts made since this run (or a retry) of the task began
        self._retry_due = False  # the last attempt failed: `task.retrying` comes next

    def begin(self, task: TaskRecord) -> None:
        """At the run's first activation: the given thread, and how attempt threads start."""
        if task.run_in is not None and workflow.patched(RUN_IN_THREAD_PATCH):
            self._given_thread = task.run_in.thread_id
        if workflow.patched(ABANDON_THREAD_PATCH):
            self._thread_cancellation = _CANCEL.ABANDON

    async def work(self, log: TaskLog, carried: TaskRunCarry | None = None) -> Resting | None:
        """Start (when held, once started), wait for the dependencies, run the attempts;
        from `carried`'s point when the run continued as new. None once the task ended;
        where the work rests when the run is to continue as new from there."""
        if carried is not None:
            self._stage, self._made = carried.stage, carried.made
            self._retry_due = carried.retry_due
            self.started = carried.stage == "attempting"
        try:
            await self._work(log)
        except ContinueHere:
            return Resting(stage=self._stage, made=self._made, retry_due=self._retry_due)
        return None

    async def _work(self, log: TaskLog) -> None:
        commands = self._run.commands
        if self._stage == "waiting":
            if not log.record.auto_start:
                await self._run.rest(lambda: self._controls.start is not None)
            if commands:
                await (
                    self._controls.gate()
                )  # a task paused before it was started is queued on resume
            self._stage = "queued"  # `task.queued` is the wait's first write, before any rest
            await self._dependencies.wait(log)
        elif self._stage == "queued":
            await self._dependencies.wait(log, announce=False)
        if self._stage == "queued":
            if commands:
                await self._begin(log)
            else:
                await log.emit("task.started", {})
            self._stage = "attempting"
        allowed = log.record.constraints.max_attempts
        while True:
            if self._retry_due:
                if commands:
                    await self._controls.gate()
                error = log.record.attempts[-1].error or "the attempt failed"
                await log.emit("task.retrying", {"reason": error})
                self._retry_due = False
            if commands:
                await self._run.checkpoint()
            result = await self._attempt(log)
            self._made += 1
            attempt = log.record.attempts[-1]  # the one just made
            if result.accepted and attempt.output is not None:
                await log.emit("task.completed", {"output": attempt.output.model_dump(mode="json")})
                return
            if self._made == allowed:
                error = attempt.error or "the attempt failed"
                await log.emit(
                    "task.failed", {"reason": f"{self._made} attempt(s) failed; last: {error}"}
                )
                return
            self._retry_due = True

    async def _begin(self, log: TaskLog) -> None:
        """`task.started`, once not paused and every dependency (links made meanwhile
        included) has completed: checked and written in one turn, so a link cannot slip
        in between."""
        while True:
            await self._controls.gate()
            async with log.turn():
                ready = set(log.record.dependencies) <= self._dependencies.completed
                if self._controls.paused_from is None and ready:
                    self.started = True
                    await log.write_in_turn(log.event("task.started", {}))
                    return
            await self._dependencies.wait(log, announce=False)

    async def _start_attempt(self, log: TaskLog, started: dict[str, Any], attempt_id: str) -> None:
        """`task.attempt.started`, checked not paused in the turn that writes it: a pause
        that came in while the task was being written to starts no attempt."""
        while True:
            await self._controls.gate()
            async with log.turn():
                if self._controls.paused_from is None:
                    started["attempt"]["startedAt"] = now_iso()
                    event = log.event("task.attempt.started", started, attempt_id=attempt_id)
                    await log.write_in_turn(event)
                    return

    async def _attempt(self, log: TaskLog) -> AttemptResult:
        task = log.record
        number = len(task.attempts) + 1
        attempt_id = f"{task.task_id}.a{number}"
        thread_id = self._given_thread or f"{task.task_id}-a{number}"
        started = {
            "attempt": {
                "attemptId": attempt_id,
                "number": number,
                "runId": workflow.info().run_id,
                "threadId": thread_id,
                "startedAt": now_iso(),
            }
        }
        if self._run.commands:
            await self._start_attempt(log, started, attempt_id)
        else:
            await log.emit("task.attempt.started", started, attempt_id=attempt_id)
        try:
            result = await self._run_attempt(task, number, attempt_id, thread_id)
            log.fold(result.event)
        except FailureError as err:
            if is_cancelled_exception(err):
                raise  # the task is being cancelled or timed out: `stop` ends the attempt
            if self._run.commands and _worker_lost(err):
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
                start_to_close_timeout=LOCAL_TIMEOUT,
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
        """Start the attempt's thread and run `task.attempt` on it; in a given thread,
        run it there as a new turn (the task neither starts nor closes that thread)."""
        commands = self._run.commands
        if self._given_thread is None:
            await self._start_thread(task, number, thread_id)
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
            if commands
            else _ATTEMPT_HEARTBEAT,
            retry_policy=RetryPolicy(maximum_attempts=1 if commands else 10),
        )
        return result

    async def _start_thread(self, task: TaskRecord, number: int, thread_id: str) -> None:
        """Start the attempt's own thread, a child of the task's run."""
        options = ThreadOptions(budget=task.constraints.budget)
        # The attempt's thread is its task's tenant's; a task without one (None) starts
        # it exactly as before tenants: no tenant in its input, no search attribute.
        child = ThreadStartInput(
            agent=task.assignee,
            session_id=task.scope.session_id,
            options=options,
            tenant=task.scope.tenant,
        )
        await workflow.start_child_workflow(
            WORKFLOW_TYPE,
            child.model_dump(mode="json", by_alias=True, exclude_none=True),
            id=thread_id,
            task_queue=workflow.info().task_queue,
            search_attributes=start_attributes(task.scope.tenant),
            # Not TERMINATE: the task closes the thread itself with the soft terminate,
            # which records the thread's end; a hard termination would record nothing.
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            cancellation_type=self._thread_cancellation,
            static_summary=f"{task.assignee} · attempt {number} of {task.task_id}",
        )
        self._thread_id = thread_id  # only a thread this task started is closed by it

    # ---- the run's other endings ----------------------------------------------------

    async def stop(
        self,
        log: TaskLog,
        work: asyncio.Future[Any],
        kind: str,
        attempt_status: str,
        reason: str | None,
    ) -> None:
        """End the task as `kind`: the running attempt's end first (so the attempt's own
        late outcome, written under the same event id, is not stored), then its thread."""
        _abandon(work)
        async with log.turn():
            if self._run.commands and log.record.terminal:
                return  # the work wrote its own ending first
            attempt = log.record.current_attempt()
            events = []
            if attempt is not None and attempt.status == "running":
                events.append(_attempt_end(log, attempt.attempt_id, attempt_status, reason))
            events.append(log.event(kind, {"reason": reason or attempt_status}))
            await log.write_in_turn(*events)
        await self._close_thread(f"its task ended {attempt_status}")

    async def decide(
        self, log: TaskLog, work: asyncio.Future[Any], status: str, command: TaskCommand
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


def _abandon(work: asyncio.Future[Any]) -> None:
    """Cancel the work the run ends without; its cancellation is expected, and retrieved
    so that it is not reported as an error nobody saw."""
    work.cancel()
    work.add_done_callback(lambda done: done.cancelled() or done.exception())


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
