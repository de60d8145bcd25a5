"""A weft schedule's recent runs, each with the thread it started and how that is going.

An `--agent` schedule's run is a `ScheduledThreadStart`, which names its thread in its memo
(`weftThread`) and ends at once, so the status worth showing is the thread's. Schedules made
before that started `AgentThread` directly: each of their runs is its thread.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionResult,
    ScheduleActionStartWorkflow,
    ScheduleDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.scheduled_threads import SCHEDULED_THREAD_TYPE, THREAD_MEMO
from weft.contract.thread import WORKFLOW_TYPE
from weft.contract.wire import CamelModel


class ScheduleRun(CamelModel):
    """One workflow a schedule started, and for an `--agent` schedule the thread it started.

    `thread_id` is None for `--thread` schedules, and for a run that has not started its
    thread yet. `status` (`running`, `completed`, `failed`, …) and `error` are the thread's
    when there is one, else the run's; looked up for the last run only, None elsewhere and
    for a run past the namespace's retention.
    """

    workflow_id: str
    run_id: str
    scheduled_at: datetime
    started_at: datetime
    thread_id: str | None = None
    status: str | None = None
    error: str | None = None


class ScheduleRuns:
    """Reads what a schedule's runs did, from Temporal."""

    def __init__(self, client: Client) -> None:
        self._client = client

    async def recent(self, description: ScheduleDescription) -> list[ScheduleRun]:
        """The schedule's recent runs, oldest first, each with its thread when it has one."""
        recent = [run for run in map(_run, description.info.recent_actions) if run is not None]
        started = _started_type(description.schedule)
        if started == SCHEDULED_THREAD_TYPE:
            return list(await asyncio.gather(*map(self._with_thread, recent)))
        if started == WORKFLOW_TYPE:
            return [run.model_copy(update={"thread_id": run.workflow_id}) for run in recent]
        return recent

    async def with_outcome(self, run: ScheduleRun) -> ScheduleRun:
        """`run` with its status, and its error when it failed: its thread's when it
        started one and did not fail itself."""
        outcome = await self._outcome(run.workflow_id, run.run_id)
        if run.thread_id and run.thread_id != run.workflow_id and outcome.status != "failed":
            outcome = await self._outcome(run.thread_id, None)
        return run.model_copy(update={"status": outcome.status, "error": outcome.error})

    async def _with_thread(self, run: ScheduleRun) -> ScheduleRun:
        """`run` with the id of the thread it started (its memo), when it has one yet."""
        handle = self._client.get_workflow_handle(run.workflow_id, run_id=run.run_id)
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:  # past the namespace's retention
                return run
            raise
        thread_id = await described.memo_value(THREAD_MEMO, None)
        return run.model_copy(update={"thread_id": thread_id}) if thread_id else run

    async def _outcome(self, workflow_id: str, run_id: str | None) -> _Outcome:
        """The status of a workflow (its latest run when `run_id` is None), and its error."""
        handle = self._client.get_workflow_handle(workflow_id, run_id=run_id)
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:  # past the namespace's retention
                return _Outcome()
            raise
        status = described.status or WorkflowExecutionStatus.RUNNING
        error = None
        if status == WorkflowExecutionStatus.FAILED:
            try:
                await handle.result(follow_runs=False)
            except WorkflowFailureError as failure:
                error = str(failure.cause)
        return _Outcome(status=status.name.lower(), error=error)


class _Outcome(CamelModel):
    """How a workflow ended, or `running`; all None when Temporal no longer knows it."""

    status: str | None = None
    error: str | None = None


def _started_type(schedule: Schedule) -> str | None:
    """The workflow type the schedule starts."""
    action = schedule.action
    return action.workflow if isinstance(action, ScheduleActionStartWorkflow) else None


def _run(action: ScheduleActionResult) -> ScheduleRun | None:
    execution = action.action
    if not isinstance(execution, ScheduleActionExecutionStartWorkflow):
        return None
    return ScheduleRun(
        workflow_id=execution.workflow_id,
        run_id=execution.first_execution_run_id,
        scheduled_at=action.scheduled_at,
        started_at=action.started_at,
    )
