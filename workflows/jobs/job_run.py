"""`JobRun`: one job's items run as tasks, at most `concurrency` at once (docs/jobs.md).

Each run claims pending items from a cursor (`job.claim`, which creates their tasks),
starts each item's `TaskRun` as a child workflow, and records its start and its end in the
job's log. After `itemsPerRun` items (or when its history grows long) a run stops
launching, waits for its running items to end and continues as new, carrying only the
job id, the cursor and its run number: the items stay in the store, so history stays
bounded at any item count. Draining first means no run ever leaves a child behind for the
next one to wait on. `cancel_job` stops launching and cancels the running items' tasks.
"""

from __future__ import annotations

import asyncio
from collections import deque
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError, FailureError, is_cancelled_exception

from weft.contract.events import Event
from weft.contract.jobs import (
    ACTIVITY_JOB_ADMIT,
    ACTIVITY_JOB_CLAIM,
    ACTIVITY_JOB_LOAD,
    ACTIVITY_JOB_RECORD,
    BATCH_KIND,
    JOB_WORKFLOW_TYPE,
    QUERY_JOB,
    SIGNAL_CANCEL_JOB,
    AdmitInput,
    CancelJob,
    Claim,
    ClaimedItem,
    ClaimQuery,
    JobEventsInput,
    JobRecord,
    JobRunInput,
    item_end_event_id,
    item_status_of_task,
)
from weft.contract.tasks import SIGNAL_CANCEL_TASK, TASK_WORKFLOW_TYPE, TaskRecord, TaskRunInput
from weft.contract.validation import describe_validation_error
from weft.workflows.failures import failure_text

INVALID_JOB_INPUT = "InvalidJobRunInput"
_LOCAL = timedelta(seconds=30)
# A run stops launching once its history is this long, whatever `itemsPerRun` says.
_HISTORY_EVENTS = 10_000
_ADMIT_HEARTBEAT = timedelta(seconds=10)
_ADMIT_LIMIT = timedelta(minutes=10)
# An item whose task failed only because its last attempt was lost with its worker runs
# its task again, this many times at most.
_LOSS_RELAUNCHES = 3
_LOST_REASON = "its last attempt was lost with its worker"


def _now() -> str:
    return workflow.now().isoformat().replace("+00:00", "Z")


@workflow.defn(name=JOB_WORKFLOW_TYPE)
class JobRunWorkflow:
    """Run a job's items to their ends; returns the job as the store has it."""

    def __init__(self) -> None:
        self._job: JobRecord | None = None
        self._cursor = 0
        self._run = 1
        self._launched = 0
        self._cancel: CancelJob | None = None
        self._running: dict[str, asyncio.Future[None]] = {}
        self._children: dict[str, workflow.ChildWorkflowHandle[Any, Any]] = {}
        self._cancel_sent: set[str] = set()

    @workflow.run
    async def run(self, raw: Any = None) -> dict[str, Any]:
        try:
            start = JobRunInput.model_validate(raw)
        except ValidationError as err:
            raise ApplicationError(
                f"invalid JobRun input: {describe_validation_error(err)}",
                type=INVALID_JOB_INPUT,
                non_retryable=True,
            ) from None
        self._cursor, self._run = start.cursor, start.run
        job = self._job = await self._load(start.job_id)
        if start.resume_reason is not None:
            await self._emit("job.started", {"resumed": True, "reason": start.resume_reason})
            job = self._job = await self._load(start.job_id)
        elif job.terminal:
            return job.model_dump(mode="json")  # nothing left to do: a stray start
        elif job.status == "accepted":
            await self._emit("job.started", {"counts": job.counts.model_dump(mode="json")})
        exhausted = await self._launch_items(job)
        await workflow.wait_condition(lambda: not self._running)
        job = self._job = await self._load(job.job_id)
        if self._cancel is None and not exhausted:
            await self._emit("job.progress", self._counts(job))
            await workflow.wait_condition(workflow.all_handlers_finished)
            # Checked after the last await: a cancel that came while the progress was
            # written ends this run instead of being lost with it.
            if self._cancel is None:
                workflow.continue_as_new(
                    JobRunInput(
                        job_id=job.job_id, cursor=self._cursor, run=self._run + 1
                    ).model_dump(mode="json")
                )
        if self._cancel is not None:
            reason = self._cancel.reason or "cancelled"
            await self._emit("job.cancelled", {"reason": reason, **self._counts(job)})
        elif exhausted:
            await self._finish(job)
        await workflow.wait_condition(workflow.all_handlers_finished)
        return (await self._load(job.job_id)).model_dump(mode="json")

    # ---- handlers -------------------------------------------------------------------

    @workflow.query(name=QUERY_JOB)
    def state(self) -> dict[str, Any]:
        """This run's compact state: its number, the cursor, the items it runs."""
        return {
            "jobId": self._job.job_id if self._job else None,
            "run": self._run,
            "cursor": self._cursor,
            "launched": self._launched,
            "running": sorted(self._running),
            "cancelling": self._cancel is not None,
        }

    @workflow.signal(name=SIGNAL_CANCEL_JOB)
    async def cancel_job(self, raw: Any = None) -> None:
        if self._cancel is not None:
            return
        try:
            self._cancel = CancelJob.model_validate(raw or {})
        except ValidationError:
            self._cancel = CancelJob(reason="cancelled (the request's reason was malformed)")
        await self._cancel_tasks()

    # ---- launching ------------------------------------------------------------------

    async def _launch_items(self, job: JobRecord) -> bool:
        """Launch items until the job has none left (True), this run has launched its
        share, or the job is cancelled (False)."""
        claimed: deque[ClaimedItem] = deque()
        while True:
            await workflow.wait_condition(
                lambda: len(self._running) < job.concurrency or self._cancel is not None
            )
            if self._cancel is not None:
                return False
            if self._launched >= job.items_per_run or self._history_long():
                if claimed:
                    self._cursor = claimed[0].index  # unlaunched: the next run claims them
                return False
            if not claimed:
                want = min(job.concurrency - len(self._running), job.items_per_run - self._launched)
                claim: Claim = await workflow.execute_local_activity(
                    ACTIVITY_JOB_CLAIM,
                    ClaimQuery(job_id=job.job_id, cursor=self._cursor, limit=max(want, 1)),
                    result_type=Claim,
                    start_to_close_timeout=_LOCAL,
                )
                if not claim.items:
                    self._cursor = claim.cursor
                    return True
                claimed.extend(claim.items)
                self._cursor = claim.cursor
            item = claimed.popleft()
            if job.rate is not None and item.start is not None:
                await workflow.execute_activity(
                    ACTIVITY_JOB_ADMIT,
                    AdmitInput(rate=job.rate, tokens=len(item.start.task.objective) // 4 + 1),
                    result_type=float,
                    start_to_close_timeout=_ADMIT_LIMIT,
                    heartbeat_timeout=_ADMIT_HEARTBEAT,
                    retry_policy=RetryPolicy(maximum_attempts=0),
                )
                if self._cancel is not None:
                    self._cursor = item.index
                    return False
            self._launched += 1
            self._running[item.item_id] = asyncio.ensure_future(self._item(job, item))

    async def _item(self, job: JobRecord, item: ClaimedItem) -> None:
        """Run one item's task to its end and record the item's start and end."""
        try:
            if item.settled is not None:
                # Its task completed in an earlier run (the job was resumed): record it.
                await self._end(job, item, TaskRecord.model_validate(item.settled))
                return
            assert item.start is not None
            start, losses = item.start, 0
            while True:
                try:
                    handle = await self._start_task(job, item, start)
                except FailureError as err:
                    if is_cancelled_exception(err):
                        raise
                    error = f"its task could not start: {failure_text(err)}"
                    await self._failed(job, item, error)
                    return
                if losses == 0:
                    await self._emit(
                        "job.item.started",
                        {"jobItem": self._item_data(item)},
                        item=item,
                        event_id=f"{item.item_id}:started:{item.launch}",
                    )
                if self._cancel is not None:
                    await self._cancel_tasks()
                try:
                    task = TaskRecord.model_validate(await handle)
                except FailureError as err:
                    if is_cancelled_exception(err):
                        raise
                    await self._failed(job, item, f"its task's run failed: {failure_text(err)}")
                    return
                if not _lost(task) or losses == _LOSS_RELAUNCHES or self._cancel is not None:
                    break
                # Its last attempt was lost with its worker (docs/tasks.md): that is no
                # verdict on the item, so its task runs again rather than failing it.
                losses += 1
                start = TaskRunInput(task=task, retry_reason=_LOST_REASON)
            await self._end(job, item, task)
        finally:
            self._children.pop(item.item_id, None)
            self._running.pop(item.item_id, None)

    async def _start_task(
        self, job: JobRecord, item: ClaimedItem, start: TaskRunInput
    ) -> workflow.ChildWorkflowHandle[Any, Any]:
        """Start a run of the item's task, registered so a cancel reaches it."""
        handle = await workflow.start_child_workflow(
            TASK_WORKFLOW_TYPE,
            start.model_dump(mode="json"),
            id=item.task_id,
            task_queue=workflow.info().task_queue,
            # The job cancels its items' tasks itself, with the task's own cancel, which
            # records their ends; a closed job run leaves none behind.
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            static_summary=f"{job.assignee} · item {item.index} of {job.job_id}",
        )
        self._children[item.item_id] = handle
        self._cancel_sent.discard(item.item_id)
        return handle

    async def _end(self, job: JobRecord, item: ClaimedItem, task: TaskRecord) -> None:
        status = item_status_of_task(task.status)
        data: dict[str, Any] = {
            **self._item_data(item),
            "status": status,
            "attempts": len(task.attempts),
        }
        if status == "completed" and task.output is not None:
            data["output"] = task.output.model_dump(mode="json")
        else:
            data["error"] = task.reason or f"its task ended {task.status}"
        kind = "job.item.completed" if status == "completed" else "job.item.failed"
        await self._emit(
            kind,
            {"jobItem": data},
            item=item,
            event_id=item_end_event_id(item.item_id, status, item.launch),
        )

    async def _failed(self, job: JobRecord, item: ClaimedItem, error: str) -> None:
        data = {**self._item_data(item), "status": "failed", "error": error}
        await self._emit(
            "job.item.failed",
            {"jobItem": data},
            item=item,
            event_id=item_end_event_id(item.item_id, "failed", item.launch),
        )

    async def _cancel_tasks(self) -> None:
        """Ask every running item's task to stop (each once)."""
        reason = (self._cancel.reason if self._cancel else None) or "its job was cancelled"
        for item_id, handle in list(self._children.items()):
            if item_id in self._cancel_sent:
                continue
            self._cancel_sent.add(item_id)
            try:
                await handle.signal(SIGNAL_CANCEL_TASK, {"reason": reason})
            except Exception as err:  # a task that already ended needs no cancel
                workflow.logger.info("task of %s not signalled: %s", item_id, err)

    async def _finish(self, job: JobRecord) -> None:
        counts = job.counts
        unfinished = counts.pending + counts.running
        if counts.failed + counts.cancelled + unfinished == 0:
            await self._emit("job.completed", self._counts(job))
            return
        parts = [
            f"{n} {what}"
            for n, what in (
                (counts.failed, "failed"),
                (counts.cancelled, "cancelled"),
                (unfinished, "not run"),
            )
            if n
        ]
        reason = f"{', '.join(parts)} of {counts.total} items"
        await self._emit("job.failed", {"reason": reason, **self._counts(job)})

    # ---- the log --------------------------------------------------------------------

    def _history_long(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= _HISTORY_EVENTS
        )

    @staticmethod
    def _counts(job: JobRecord) -> dict[str, Any]:
        return {"counts": job.counts.model_dump(mode="json")}

    @staticmethod
    def _item_data(item: ClaimedItem) -> dict[str, Any]:
        return {"itemId": item.item_id, "index": item.index, "taskId": item.task_id}

    async def _load(self, job_id: str) -> JobRecord:
        record: JobRecord = await workflow.execute_local_activity(
            ACTIVITY_JOB_LOAD, job_id, result_type=JobRecord, start_to_close_timeout=_LOCAL
        )
        return record

    async def _emit(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        item: ClaimedItem | None = None,
        event_id: str | None = None,
    ) -> None:
        """Write one event of the job's log (`job.record`, a local activity)."""
        job = self._job
        assert job is not None
        event = Event.model_validate(
            {
                "type": kind,
                "eventId": event_id or f"{job.job_id}:{workflow.uuid4().hex}",
                "timestamp": _now(),
                "threadId": job.job_id,  # the log key: a job's events are its own log
                "sessionId": job.session_id,
                "runId": workflow.info().run_id,
                "status": _STATUS_AFTER.get(kind, "running"),
                "jobId": job.job_id,
                **({"jobItemId": item.item_id, "taskId": item.task_id} if item else {}),
                "payload": {"kind": BATCH_KIND, **payload},
            }
        ).to_wire()
        await workflow.execute_local_activity(
            ACTIVITY_JOB_RECORD,
            JobEventsInput(events=[event]),
            start_to_close_timeout=_LOCAL,
            summary=kind,
        )


def _lost(task: TaskRecord) -> bool:
    """Whether the task failed because its last attempt was lost with its worker."""
    last = task.current_attempt()
    return task.status == "failed" and last is not None and last.status == "lost"


# The job's status each event leaves it in (the envelope's `status`).
_STATUS_AFTER = {"job.completed": "completed", "job.failed": "failed", "job.cancelled": "cancelled"}
