"""`job.record`, `job.load` and `job.claim`: the `JobRun` workflow's facts written to the
job's log with its rows, the job as the store has it, and the next items to launch
(local activities: each is one short transaction)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import activity

from weft.activities.clock import now_iso
from weft.contract.events import Event
from weft.contract.jobs import (
    ACTIVITY_JOB_CLAIM,
    ACTIVITY_JOB_LOAD,
    ACTIVITY_JOB_RECORD,
    Claim,
    ClaimedItem,
    ClaimQuery,
    JobEventsInput,
    JobItem,
    JobRecord,
)
from weft.contract.tasks import (
    UNSUCCESSFUL_STATUSES,
    TaskRecord,
    TaskRunInput,
)
from weft.store import Store


class JobRecordActivities:
    """Writes job events with their rows; reads the job; claims items, creating their tasks."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name=ACTIVITY_JOB_RECORD)
    async def record(self, batch: JobEventsInput) -> None:
        """Store the workflow's job events (idempotent by event id) and fold the rows."""
        events = [Event.model_validate(e) for e in batch.events]
        await asyncio.to_thread(self._store.jobs.record, events)

    @activity.defn(name=ACTIVITY_JOB_LOAD)
    async def load(self, job_id: str) -> JobRecord:
        """The job's row: its spec and counts."""
        record = await asyncio.to_thread(self._store.jobs.get, job_id)
        if record is None:
            raise LookupError(f"no job {job_id!r} in the store")
        return record

    @activity.defn(name=ACTIVITY_JOB_CLAIM)
    async def claim(self, query: ClaimQuery) -> Claim:
        """Up to `limit` pending items from the cursor on, each with its task created (a
        retried claim finds the tasks it made: their ids and creation events are derived
        from the item)."""
        return await asyncio.to_thread(self._claim, query)

    def _claim(self, query: ClaimQuery) -> Claim:
        job = self._store.jobs.get(query.job_id)
        if job is None:
            raise LookupError(f"no job {query.job_id!r} in the store")
        items = self._store.jobs.pending(query.job_id, query.cursor, query.limit)
        claimed = [self._ready(job, item) for item in items]
        cursor = items[-1].index + 1 if items else max(query.cursor, job.counts.total)
        return Claim(items=claimed, cursor=cursor)

    def _ready(self, job: JobRecord, item: JobItem) -> ClaimedItem:
        known = self._store.tasks.get(item.task_id)
        base: dict[str, Any] = {
            "item_id": item.item_id,
            "index": item.index,
            "task_id": item.task_id,
            "launch": item.launches + 1,
        }
        if known is None:
            known = self._create_task(job, item)
        elif known.status == "completed":
            return ClaimedItem(**base, settled=known.model_dump(mode="json"))
        elif known.status in UNSUCCESSFUL_STATUSES:
            # A resumed job runs the item's task again: a new run of it, new attempts.
            start = TaskRunInput(task=known, retry_reason="its job was resumed")
            return ClaimedItem(**base, start=start)
        return ClaimedItem(**base, start=TaskRunInput(task=known))

    def _create_task(self, job: JobRecord, item: JobItem) -> TaskRecord:
        at = now_iso()
        record = TaskRecord.model_validate(
            {
                "taskId": item.task_id,
                "objective": item.input,
                "assignee": job.assignee,
                # An item's task is its job's tenant's (none: `default`, left out).
                "scope": {
                    k: v
                    for k, v in (("sessionId", job.session_id), ("tenant", job.tenant))
                    if v is not None
                },
                "constraints": job.constraints.model_dump(mode="json"),
                "acceptance": job.acceptance.model_dump(mode="json", by_alias=True),
                "createdAt": at,
                "updatedAt": at,
            }
        )
        created = Event.model_validate(
            {
                "type": "task.created",
                # One id per item's task: a retried claim stores it once.
                "eventId": f"{item.task_id}:task.created",
                "timestamp": at,
                "threadId": item.task_id,
                "sessionId": job.session_id,
                "status": "accepted",
                "taskId": item.task_id,
                "jobId": job.job_id,
                "jobItemId": item.item_id,
                "payload": {"task": record.model_dump(mode="json")},
            }
        )
        self._store.tasks.record([created])
        stored = self._store.tasks.get(item.task_id)
        assert stored is not None, f"task {item.task_id} was not stored"
        return stored
