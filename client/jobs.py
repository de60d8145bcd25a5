"""Jobs from Python (`weft.Jobs`): create a job from items, read its status and results,
watch its progress, cancel and resume it, over Temporal and the store (docs/jobs.md).

`create` checks every item and the job's options before anything starts, stores the job,
its items and `job.created` in one transaction, and starts its `JobRun` workflow; every
later fact is the workflow's, but one: a run closed through Temporal (terminated, timed
out, cancelled there) writes no end, so the readers that ask Temporal (`show`,
`list_checked`, `watch`, `wait`, `resume`) record the end it states, once. Reads come
from the store's `jobs` and `job_items` rows.
"""

from __future__ import annotations

import asyncio
import builtins
import itertools
import json
import uuid
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ValidationError
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from weft.activities.rate_limits import parse_keyed_rate
from weft.activities.task_commands import run_closed
from weft.activities.task_deletion import delete_job
from weft.activities.thread_deletion import DEFAULT_GRACE_SECONDS, DeletionReport
from weft.client.audit_trail import PYTHON_SUBJECT
from weft.client.run_close import RunClose, record_listed_closes, unwritten_close
from weft.client.tasks import Tasks
from weft.client.thread_tenant import thread_tenant
from weft.contract.events import Event
from weft.contract.jobs import (
    BATCH_KIND,
    JOB_WORKFLOW_TYPE,
    MAX_ITEMS,
    QUERY_JOB,
    SIGNAL_CANCEL_JOB,
    STATUS_OF_JOB_EVENT,
    CancelJob,
    JobItem,
    JobItemSpec,
    JobRate,
    JobRecord,
    JobRunInput,
    JobSpec,
    JobThreadNotFound,
    check_job_id,
    item_id_of,
    item_task_id,
)
from weft.contract.jobs import JobError as JobError  # the refusals, shared with deletion
from weft.contract.jobs import JobNotFound as JobNotFound
from weft.contract.tasks import TaskRecord
from weft.contract.tenants import DEFAULT_TENANT
from weft.contract.validation import describe_validation_error
from weft.store import Store
from weft.store.jobs import JobExists


def new_job_id() -> str:
    """A fresh `job-<12 hex>` id."""
    return f"job-{uuid.uuid4().hex[:12]}"


def parse_rate(text: str) -> JobRate:
    """`openai=500rpm,200000tpm` as a job's rate; JobError saying what is wrong."""
    try:
        key, limit = parse_keyed_rate(text)
    except ValueError as err:
        raise JobError(f"rate: {err}") from None
    return JobRate(
        key=key,
        requests_per_minute=limit.requests_per_minute,
        tokens_per_minute=limit.tokens_per_minute,
    )


def parse_item(value: Any, where: str) -> JobItemSpec:
    """One item: a string (its input) or an object with `input`, `key`, `metadata`;
    JobError naming `where` and the field."""
    if isinstance(value, str):
        value = {"input": value}
    if not isinstance(value, dict):
        raise JobError(f'{where}: an item is a JSON string or an object with "input"')
    try:
        return JobItemSpec.model_validate(value)
    except ValidationError as err:
        raise JobError(f"{where}: {describe_validation_error(err)}") from None


def read_items(lines: Iterable[str], source: str = "items") -> list[JobItemSpec]:
    """Items from JSON Lines (blank lines skipped); JobError naming the line number and
    what is wrong with it, or a repeated key."""
    items: list[JobItemSpec] = []
    keys: dict[str, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        try:
            value = json.loads(line)
        except ValueError as err:
            raise JobError(f"{where}: not JSON ({err})") from None
        item = parse_item(value, where)
        if item.key is not None:
            if item.key in keys:
                raise JobError(f"{where}: key {item.key!r} is also on line {keys[item.key]}")
            keys[item.key] = number
        items.append(item)
        if len(items) > MAX_ITEMS:
            raise JobError(f"{source}: more than {MAX_ITEMS} items")
    if not items:
        raise JobError(f"{source}: no items (one JSON value a line)")
    return items


def read_items_file(path: str | Path) -> list[JobItemSpec]:
    """Items from a JSONL file; JobError naming the file and line."""
    try:
        with open(path, encoding="utf-8") as handle:
            return read_items(handle, str(path))
    except OSError as err:
        raise JobError(f"{path}: {err.strerror or err}") from None
    except UnicodeDecodeError as err:
        raise JobError(f"{path}: not UTF-8 text ({err.reason})") from None


def result_line(item: JobItem) -> dict[str, Any]:
    """An item's result as one JSON Lines object: status, output or error."""
    line: dict[str, Any] = {"itemId": item.item_id, "index": item.index}
    if item.key is not None:
        line["key"] = item.key
    line |= {"status": item.status, "taskId": item.task_id, "attempts": item.attempts}
    if item.output is not None:
        line["output"] = item.output.response
        if item.output.structured is not None:
            line["structured"] = item.output.structured
        line["threadId"] = item.output.thread_id
    if item.error is not None:
        line["error"] = item.error
    if item.metadata is not None:
        line["metadata"] = item.metadata
    return line


class Jobs:
    """Jobs of one task queue, with the store their facts are written to."""

    def __init__(self, client: Client, store: Store, *, task_queue: str = "agents") -> None:
        self._client = client
        self._store = store
        self._task_queue = task_queue

    async def create(
        self,
        assignee: str,
        items: Sequence[str | dict[str, Any] | JobItemSpec],
        *,
        concurrency: int = 4,
        job_id: str | None = None,
        rate: str | JobRate | dict[str, Any] | None = None,
        acceptance_schema: dict[str, Any] | None = None,
        thread_id: str | None = None,
        **fields: Any,
    ) -> JobRecord:
        """Create a job of `items` for `assignee` and start it; `fields` are the other
        `JobSpec` fields (`constraints`, `session_id`, `items_per_run`, `tenant`: the job's
        and its items' tasks', `default` when left out).

        `thread_id`: the thread the job belongs to, listed in its `subagent_job_summary`;
        the job is that thread's tenant's. An unknown thread, or one of another tenant than
        `tenant`, is refused the same way (`threadId: no thread '…'`)."""
        specs = [
            i if isinstance(i, JobItemSpec) else parse_item(i, f"items[{n}]")
            for n, i in enumerate(items)
        ]
        if not specs:
            raise JobError("items: a job needs at least one item")
        spec = _spec(
            {
                "assignee": assignee,
                "concurrency": concurrency,
                "rate": parse_rate(rate) if isinstance(rate, str) else rate,
                "acceptance": {"schema": acceptance_schema},
                # Only when given: `fields` may carry it already (as `threadId`).
                **({"thread_id": thread_id} if thread_id is not None else {}),
                **fields,
            }
        )
        if spec.thread_id is not None:
            owner = await self._thread_tenant(spec.thread_id, spec.tenant)
            spec = spec.model_copy(update={"tenant": None if owner == DEFAULT_TENANT else owner})
        try:
            job_id = check_job_id(job_id) if job_id else new_job_id()
        except ValueError as err:
            raise JobError(str(err)) from None
        at = now_iso()
        record = JobRecord.model_validate(
            {
                **spec.model_dump(mode="json"),
                "jobId": job_id,
                "createdAt": at,
                "updatedAt": at,
                "counts": {"total": len(specs), "pending": len(specs)},
            }
        )
        rows = [
            JobItem(
                item_id=item_id_of(job_id, n),
                job_id=job_id,
                index=n,
                task_id=item_task_id(job_id, n),
                input=s.input,
                key=s.key,
                metadata=s.metadata,
            )
            for n, s in enumerate(specs)
        ]
        try:
            await asyncio.to_thread(self._store.jobs.create, record, rows, _created(record))
        except JobExists as err:
            raise JobError(str(err)) from None
        await self._start(record, JobRunInput(job_id=job_id), "")
        return self.get(job_id)

    def get(self, job_id: str) -> JobRecord:
        """The job as the store has it; `JobNotFound` naming the id."""
        record = self._store.jobs.get(job_id)
        if record is None:
            raise JobNotFound(f"no job {job_id!r}")
        return record

    async def show(self, job_id: str) -> JobRecord:
        """The job as the store has it, once an end Temporal states and the store lacks is
        recorded (an open job's run closed through Temporal: one describe); `JobNotFound`
        naming the id."""
        record = await asyncio.to_thread(self.get, job_id)
        if not record.terminal and await self._record_unwritten_end(record):
            record = await asyncio.to_thread(self.get, job_id)
        return record

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> list[JobRecord]:
        """Jobs, most recently changed first (of one `tenant`, when given), as the store
        has them."""
        return self._store.jobs.list(statuses=statuses, tenant=tenant, limit=limit)

    async def list_checked(
        self,
        *,
        statuses: Sequence[str] | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> builtins.list[JobRecord]:
        """`list`, once the ends Temporal states for the listed open jobs are recorded
        (one visibility query finds them, client/run_close.py)."""

        def listed() -> builtins.list[JobRecord]:
            return self.list(statuses=statuses, tenant=tenant, limit=limit)

        records = await asyncio.to_thread(listed)
        open_jobs = [r for r in records if not r.terminal]
        if await record_listed_closes(
            self._client, open_jobs, lambda r: r.job_id, self._record_unwritten_end
        ):
            records = await asyncio.to_thread(listed)  # their status (and order) moved
        return records

    def items(self, job_id: str) -> Iterator[JobItem]:
        """Every item of the job, in the order given."""
        self.get(job_id)
        return self._store.jobs.all_items(job_id)

    def results(self, job_id: str) -> Iterator[str]:
        """The job's results as JSON Lines: one line per item, its status and output."""
        for item in self.items(job_id):
            yield json.dumps(result_line(item), ensure_ascii=False)

    def events(self, job_id: str, *, after: int = 0) -> builtins.list[Event]:
        """The job's log, oldest first."""
        self.get(job_id)
        return self._store.jobs.events(job_id, after=after)

    async def cancel(self, job_id: str, reason: str | None = None) -> None:
        """Stop launching items and cancel the running ones' tasks: the job ends
        `cancelled`; items not yet started stay pending (a resume runs them)."""
        record = self.get(job_id)
        if record.terminal:
            raise JobError(f"cannot cancel job {job_id}: it is {record.status}")
        await self._handle(job_id).signal(
            SIGNAL_CANCEL_JOB, CancelJob(reason=reason).model_dump(mode="json")
        )

    async def resume(
        self, job_id: str, reason: str | None = None, *, wait_seconds: float = 60
    ) -> JobRecord:
        """Run a cancelled or failed job again: its items that did not complete (pending,
        cancelled, failed) run; completed ones stay as they are.

        The next run starts only once the last one has ended (Temporal's result of it,
        waited for up to `wait_seconds`): a job whose cancel is still under way has items
        whose tasks are still being cancelled, and a run started beside them would find
        those tasks still running. JobError when it does not end in time."""
        record = await self.show(job_id)
        if record.status not in _RESUMABLE and not (
            not record.terminal and await self._cancelling(job_id)
        ):
            raise JobError(
                f"job {job_id} is {record.status}: only a cancelled or failed job can be resumed"
            )
        await self._last_run_ended(job_id, wait_seconds)
        record = await self.show(job_id)  # as the ended run left it
        if record.status not in _RESUMABLE:
            raise JobError(
                f"job {job_id} is {record.status}: only a cancelled or failed job can be resumed"
            )
        await self._no_task_left_running(record)
        start = JobRunInput(job_id=job_id, resume_reason=reason or "resumed")
        await self._start(record, start, " (resumed)")
        return self.get(job_id)

    async def _cancelling(self, job_id: str) -> bool:
        """Whether the job's running run was asked to cancel (its query says so)."""
        try:
            state = await self._handle(job_id).query(QUERY_JOB)
        except (RPCError, WorkflowQueryFailedError):
            return False  # no run to ask: the job is not being cancelled
        return isinstance(state, dict) and bool(state.get("cancelling"))

    async def _last_run_ended(self, job_id: str, wait_seconds: float) -> None:
        """Wait for the job's last run (and any it continued as) to end, however it ended;
        JobError naming the job when it has not ended within `wait_seconds`."""
        if not await run_closed(self._handle(job_id), wait_seconds):
            raise JobError(
                f"job {job_id}'s last run has not ended within {wait_seconds:g} s (its items' "
                "tasks are still being cancelled); resume it again once it has"
            )

    async def _no_task_left_running(self, record: JobRecord) -> None:
        """JobError naming the tasks when a run closed through Temporal left items whose
        tasks still run (a job's tasks are not closed with it): a resume would start them
        again beside themselves. A task whose own run was closed through Temporal too is
        recorded ended first (`Tasks.record_closed_runs`), as `weft task get` would."""
        running = await asyncio.to_thread(self._open_item_tasks, record.job_id)
        tasks = Tasks(self._client, self._store, task_queue=self._task_queue)
        if running and await tasks.record_closed_runs(running):
            running = await asyncio.to_thread(self._open_item_tasks, record.job_id)
        if running:
            ids = [task.task_id for task in running]
            shown = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
            raise JobError(
                f"job {record.job_id} cannot be resumed yet: its run was closed with "
                f"{len(ids)} items' tasks still running ({shown}); resume it once they "
                "have ended (or cancel them: weft task cancel)"
            )

    def _open_item_tasks(self, job_id: str) -> builtins.list[TaskRecord]:
        """The unfinished tasks of the job's items its rows say are running."""
        items = self._store.jobs.items(job_id, statuses=["running"], limit=10_000)
        found = (self._store.tasks.get(item.task_id) for item in items)
        return [task for task in found if task is not None and not task.terminal]

    async def wait(self, job_id: str) -> JobRecord:
        """Wait for the job's runs to end; the job as it then is (a run closed through
        Temporal ends the wait too, its end recorded)."""
        self.get(job_id)
        try:
            await self._handle(job_id).result()
        except WorkflowFailureError:
            pass  # closed without returning: `show` records how
        return await self.show(job_id)

    async def watch(self, job_id: str, *, every: float = 0.5) -> AsyncIterator[JobRecord]:
        """The job each time its status or counts change, until it ends (the last one
        yielded is terminal). Every tenth poll asks Temporal whether the job's run closed
        without writing its end (through Temporal): that end is recorded, and ends the
        watch too."""
        last: tuple[Any, ...] | None = None
        for poll in itertools.count():
            if poll % _CHECK_EVERY_POLLS == 0:
                record = await self.show(job_id)
            else:
                record = self.get(job_id)
            now = (record.status, record.counts)
            if now != last:
                last = now
                yield record
            if record.terminal:
                return
            await asyncio.sleep(every)

    async def delete(
        self,
        job_id: str,
        *,
        with_threads: bool = False,
        grace: float = DEFAULT_GRACE_SECONDS,
        audit_as: str | None = PYTHON_SUBJECT,
    ) -> DeletionReport:
        """Delete the job so nothing of it is left: cancelled first if open (waited for up
        to `grace` seconds, then terminated), each item's task as `Tasks.delete` does (with
        `with_threads`, the threads their attempts ran), then its items, log and Temporal
        runs (docs/deletion.md). `JobNotFound` when nothing of it is left. The audit log
        records it as done by `audit_as` (None: not recorded; the HTTP API records its
        requests itself)."""
        return await delete_job(
            self._client,
            self._store,
            job_id,
            with_threads=with_threads,
            grace=grace,
            audit_subject=audit_as,
        )

    async def _record_unwritten_end(self, record: JobRecord) -> bool:
        return await record_unwritten_end(self._client, self._store, record)

    async def _thread_tenant(self, thread_id: str, tenant: str | None) -> str:
        """The tenant of the thread a job is created for; JobError naming `threadId`,
        worded as for an unknown thread, when it is unknown or not `tenant`'s (so a tenant
        learns nothing of another's threads)."""
        theirs = await thread_tenant(self._client, self._store, thread_id)
        if theirs is None or (tenant is not None and tenant != theirs):
            raise JobThreadNotFound(thread_id)
        return theirs

    async def _start(self, record: JobRecord, start: JobRunInput, note: str) -> None:
        try:
            await self._client.start_workflow(
                JOB_WORKFLOW_TYPE,
                start.model_dump(mode="json"),
                id=record.job_id,
                task_queue=self._task_queue,
                static_summary=f"job {record.job_id} · {record.assignee}{note}",
            )
        except WorkflowAlreadyStartedError:
            raise JobError(f"job {record.job_id} is still running its last run") from None
        except Exception as err:
            raise JobError(f"job {record.job_id} could not start: {err}") from err

    def _handle(self, job_id: str) -> WorkflowHandle[Any, Any]:
        return self._client.get_workflow_handle(job_id)


# The statuses a job is resumed from.
_RESUMABLE = ("cancelled", "failed")
# `watch` asks Temporal whether the run closed every this many polls (5 s at 0.5 s).
_CHECK_EVERY_POLLS = 10


def now_iso() -> str:
    """Current UTC time as ISO-8601 with milliseconds and a Z suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _spec(fields: dict[str, Any]) -> JobSpec:
    """The checked spec; JobError naming the field or the schema's problem."""
    try:
        spec = JobSpec.model_validate(fields)
    except ValidationError as err:
        raise JobError(f"invalid job: {describe_validation_error(err)}") from None
    schema = spec.acceptance.schema_
    if schema is not None:
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as err:
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            raise JobError(f"acceptance.schema at {where}: {err.message}") from None
    return spec


async def record_unwritten_end(client: Client, store: Store, record: JobRecord) -> bool:
    """Record the end of an open job whose latest run Temporal says closed without writing
    it (terminated, timed out, failed or cancelled through Temporal); True when this call
    stored it. Once: its event id is the closed run's, and the store writes no end for a
    job that has one."""
    close = await unwritten_close(client, record.job_id)
    if close is None:
        return False
    return await asyncio.to_thread(store.jobs.record_end, _run_closed(record, close))


def _run_closed(record: JobRecord, close: RunClose) -> Event:
    """The job's end as Temporal states it, in the job's log as its run would have
    written it: `job.cancelled` for a run cancelled through Temporal, `job.failed` with
    Temporal's reason otherwise, under an id of the closed run (written once)."""
    kind = "job.cancelled" if close.closed_as == "cancelled" else "job.failed"
    at = close.closed_at.astimezone(UTC).isoformat(timespec="milliseconds")
    return Event.model_validate(
        {
            "type": kind,
            "eventId": f"{record.job_id}:{close.run_id}:closed",
            "timestamp": at.replace("+00:00", "Z"),
            "threadId": record.job_id,
            "sessionId": record.session_id,
            "runId": close.run_id,
            "status": STATUS_OF_JOB_EVENT[kind],
            "jobId": record.job_id,
            "payload": {
                "kind": BATCH_KIND,
                "reason": close.reason,
                "closedAs": close.closed_as,
                "counts": record.counts.model_dump(mode="json"),
            },
        }
    )


def _created(record: JobRecord) -> Event:
    return Event.model_validate(
        {
            "type": "job.created",
            "eventId": f"{record.job_id}:job.created",
            "timestamp": record.created_at,
            "threadId": record.job_id,  # the job's own log
            "sessionId": record.session_id,
            "status": "accepted",
            "jobId": record.job_id,
            "payload": {"kind": BATCH_KIND, "job": record.model_dump(mode="json")},
        }
    )
