"""Jobs in the store: the `jobs` row, one `job_items` row per item, and the job's `job.*`
events stored under the job id, each folded into the rows in the commit that stores it.

An item's end is written once: a completion's event id is the item's (`item_end_event_id`),
so a retried write stores nothing twice, and only newly stored events move an item and the
job's counts. The counts change with each item's move, in the same transaction.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Connection,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Table,
    UniqueConstraint,
    func,
    select,
    text,
    update,
)

from weft.contract.events import Event
from weft.contract.jobs import (
    ITEM_TERMINAL,
    JOB_TERMINAL,
    STATUS_OF_JOB_EVENT,
    JobCounts,
    JobItem,
    JobRecord,
)
from weft.contract.tasks import TaskOutput
from weft.contract.tenants import DEFAULT_TENANT
from weft.store.database import Database
from weft.store.events import insert_events
from weft.store.rows import row_to_event
from weft.store.run_order import written_after_run
from weft.store.tables import ID_LENGTH, UTCDateTime, events, metadata

# One row per job (docs/jobs.md): its record, folded from its `job.*` events.
jobs = Table(
    "jobs",
    metadata,
    Column("job_id", String(ID_LENGTH), primary_key=True),
    Column("status", String(32), nullable=False),
    Column("assignee", String(ID_LENGTH), nullable=False),
    Column("data", JSON, nullable=False),  # the JobRecord
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # The job's tenant (none: `default`), set at its creation (docs/tenants.md).
    Column("tenant", String(ID_LENGTH), nullable=False, server_default=text("'default'")),
    Index("ix_jobs_status_updated", "status", "updated_at"),
    Index("ix_jobs_tenant_updated", "tenant", "updated_at"),
)

# One row per item, in the order given: its input, status and outcome.
job_items = Table(
    "job_items",
    metadata,
    Column("job_id", String(ID_LENGTH), nullable=False),
    Column("idx", Integer, nullable=False),
    Column("item_id", String(ID_LENGTH), nullable=False),
    Column("status", String(32), nullable=False),
    Column("data", JSON, nullable=False),  # the JobItem
    PrimaryKeyConstraint("job_id", "idx"),
    UniqueConstraint("item_id", name="uq_job_items_item_id"),
    Index("ix_job_items_job_status_idx", "job_id", "status", "idx"),
)

_READ_LIMIT = 10_000
_INSERT_CHUNK = 500


class JobExists(ValueError):
    """A job with this id was created already."""


class Jobs:
    """Create jobs with their items; store their events with the rows; read them."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def create(self, record: JobRecord, items: Sequence[JobItem], created: Event) -> None:
        """Store the job, its items and `job.created` in one transaction; `JobExists`
        when the id is taken."""

        def once() -> None:
            with self._db.write() as connection:
                taken = connection.scalar(
                    select(jobs.c.job_id).where(jobs.c.job_id == record.job_id)
                )
                if taken is not None:
                    raise JobExists(f"job {record.job_id} exists already")
                now = datetime.now(UTC)
                connection.execute(
                    jobs.insert().values(
                        job_id=record.job_id,
                        status=record.status,
                        assignee=record.assignee,
                        tenant=record.tenant or DEFAULT_TENANT,
                        data=record.model_dump(mode="json"),
                        created_at=now,
                        updated_at=now,
                    )
                )
                for start in range(0, len(items), _INSERT_CHUNK):
                    connection.execute(
                        job_items.insert(),
                        [_item_row(item) for item in items[start : start + _INSERT_CHUNK]],
                    )
                insert_events(self._db, connection, {record.job_id: [created]})

        self._db.retrying(once)

    def record(self, events_: Sequence[Event]) -> builtins.list[Event]:
        """Store a job's events (`thread_id` is the job id) and fold the newly stored ones
        into its rows; returns them."""
        by_job: dict[str, builtins.list[Event]] = {}
        for event in events_:
            by_job.setdefault(event.thread_id, []).append(event)
        if not by_job:
            return []

        def once() -> builtins.list[Event]:
            with self._db.write() as connection:
                stored = insert_events(self._db, connection, by_job)
                for job_id in sorted(by_job):
                    fresh = [e for e in stored if e.thread_id == job_id]
                    if fresh:
                        _fold(connection, job_id, fresh)
                return stored

        return self._db.retrying(once)

    def record_end(self, end: Event) -> bool:
        """Store a job's end that its run did not write (its run was closed through
        Temporal), unless the job has ended already: a run that wrote its own end, or
        another reader that recorded this one first, leaves nothing to write; nor does a
        newer run's write (a resume that began after the closed run wrote its own end:
        `written_after_run`). One transaction; True when it was stored."""

        def once() -> bool:
            with self._db.write() as connection:
                # Locked before the read: a late end written by the closed run waits, and
                # then finds this one (or this one finds it).
                self._db.lock_thread(connection, end.thread_id)
                status = connection.scalar(
                    select(jobs.c.status).where(jobs.c.job_id == end.thread_id)
                )
                if status is None or status in JOB_TERMINAL:
                    return False
                if end.run_id and written_after_run(connection, end.thread_id, end.run_id):
                    return False
                stored = insert_events(self._db, connection, {end.thread_id: [end]})
                if stored:
                    _fold(connection, end.thread_id, stored)
                return bool(stored)

        return self._db.retrying(once)

    def tenant(self, job_id: str) -> str | None:
        """The tenant the job belongs to, or None when there is no such job."""
        with self._db.read() as connection:
            found: str | None = connection.scalar(
                select(jobs.c.tenant).where(jobs.c.job_id == job_id)
            )
        return found

    def get(self, job_id: str) -> JobRecord | None:
        """The job's row, or None when no such job was created."""
        with self._db.read() as connection:
            data = connection.scalar(select(jobs.c.data).where(jobs.c.job_id == job_id))
        return None if data is None else JobRecord.model_validate(data)

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> builtins.list[JobRecord]:
        """Jobs, most recently changed first (of one `tenant`, when given)."""
        query = select(jobs.c.data).order_by(jobs.c.updated_at.desc(), jobs.c.job_id)
        if statuses is not None:
            query = query.where(jobs.c.status.in_(builtins.list(statuses)))
        if tenant is not None:
            query = query.where(jobs.c.tenant == tenant)
        with self._db.read() as connection:
            return [JobRecord.model_validate(d) for d in connection.scalars(query.limit(limit))]

    def item(self, job_id: str, index: int) -> JobItem | None:
        """One item by its index."""
        query = select(job_items.c.data).where(
            job_items.c.job_id == job_id, job_items.c.idx == index
        )
        with self._db.read() as connection:
            data = connection.scalar(query)
        return None if data is None else JobItem.model_validate(data)

    def items(
        self,
        job_id: str,
        *,
        after: int = -1,
        limit: int = 1000,
        statuses: Sequence[str] | None = None,
    ) -> builtins.list[JobItem]:
        """Items with an index over `after`, in order (of `statuses`, when given)."""
        query = (
            select(job_items.c.data)
            .where(job_items.c.job_id == job_id, job_items.c.idx > after)
            .order_by(job_items.c.idx)
            .limit(limit)
        )
        if statuses is not None:
            query = query.where(job_items.c.status.in_(builtins.list(statuses)))
        with self._db.read() as connection:
            return [JobItem.model_validate(d) for d in connection.scalars(query)]

    def all_items(self, job_id: str, *, page: int = 1000) -> Iterator[JobItem]:
        """Every item of the job in order, read a page at a time."""
        after = -1
        while batch := self.items(job_id, after=after, limit=page):
            yield from batch
            after = batch[-1].index

    def pending(self, job_id: str, cursor: int, limit: int) -> builtins.list[JobItem]:
        """Up to `limit` pending items from index `cursor` on, in order."""
        return self.items(job_id, after=cursor - 1, limit=limit, statuses=["pending"])

    def events(
        self, job_id: str, *, after: int = 0, limit: int = _READ_LIMIT
    ) -> builtins.list[Event]:
        """The job's log, oldest first."""
        query = (
            select(events.c.data)
            .where(events.c.thread_id == job_id, events.c.sequence > after)
            .order_by(events.c.sequence)
            .limit(limit)
        )
        with self._db.read() as connection:
            return [row_to_event(data) for data in connection.scalars(query)]

    def recount(self, job_id: str) -> JobCounts:
        """The counts as the item rows say (the job row keeps the same numbers)."""
        with self._db.read() as connection:
            return _counts(connection, job_id)


def _item_row(item: JobItem) -> dict[str, Any]:
    return {
        "job_id": item.job_id,
        "idx": item.index,
        "item_id": item.item_id,
        "status": item.status,
        "data": item.model_dump(mode="json"),
    }


def _counts(connection: Connection, job_id: str) -> JobCounts:
    query = (
        select(job_items.c.status, func.count())
        .where(job_items.c.job_id == job_id)
        .group_by(job_items.c.status)
    )
    by_status = {status: int(n) for status, n in connection.execute(query)}
    return JobCounts(total=sum(by_status.values()), **by_status)


def _fold(connection: Connection, job_id: str, fresh: list[Event]) -> None:
    """Fold newly stored events into the job's rows, in the caller's transaction."""
    data = connection.scalar(select(jobs.c.data).where(jobs.c.job_id == job_id))
    if data is None:
        return  # events of a job whose creation is not stored: nothing to fold into
    record = JobRecord.model_validate(data)
    counts = record.counts
    for event in fresh:
        payload = event.payload if isinstance(event.payload, dict) else {}
        changes: dict[str, Any] = {"updated_at": event.timestamp}
        if event.type in STATUS_OF_JOB_EVENT:
            changes["status"] = STATUS_OF_JOB_EVENT[event.type]
            changes["reason"] = payload.get("reason")
        if event.type == "job.started" and payload.get("resumed"):
            _reopen(connection, job_id)
            counts = _counts(connection, job_id)
        elif event.type.startswith("job.item."):
            counts = _move_item(connection, job_id, event, payload.get("jobItem") or {}, counts)
        record = record.model_copy(update={**changes, "counts": counts})
    values = {
        "status": record.status,
        "data": record.model_dump(mode="json"),
        "updated_at": datetime.now(UTC),
    }
    connection.execute(update(jobs).where(jobs.c.job_id == job_id).values(**values))


def _reopen(connection: Connection, job_id: str) -> None:
    """A resumed job runs its cancelled and failed items again: they are pending. So are
    items still `running`: a resume starts only once the last run has ended, so their run
    was closed through Temporal before it recorded their ends, and the new run records
    their tasks' ends (or runs them again)."""
    rows = connection.execute(
        select(job_items.c.idx, job_items.c.data).where(
            job_items.c.job_id == job_id,
            job_items.c.status.in_(["cancelled", "failed", "running"]),
        )
    ).all()
    for index, data in rows:
        item = JobItem.model_validate(data).model_copy(
            update={"status": "pending", "error": None, "ended_at": None}
        )
        _write_item(connection, job_id, index, item)


def _move_item(
    connection: Connection, job_id: str, event: Event, data: dict[str, Any], counts: JobCounts
) -> JobCounts:
    """Apply a `job.item.*` event to its item row; the counts after the move. A completed
    item never moves again, and an end arriving for an item not running changes nothing."""
    index = data.get("index")
    row = connection.scalar(
        select(job_items.c.data).where(job_items.c.job_id == job_id, job_items.c.idx == index)
    )
    if row is None:
        return counts
    item = JobItem.model_validate(row)
    old = item.status
    if event.type == "job.item.started":
        if old != "pending":
            return counts
        item = item.model_copy(
            update={
                "status": "running",
                "launches": item.launches + 1,
                "started_at": event.timestamp,
                "ended_at": None,
            }
        )
    else:
        if old in ITEM_TERMINAL:
            return counts
        new = "completed" if event.type == "job.item.completed" else data.get("status", "failed")
        output = data.get("output")
        item = item.model_copy(
            update={
                "status": new,
                "ended_at": event.timestamp,
                "attempts": int(data.get("attempts") or item.attempts),
                "output": TaskOutput.model_validate(output) if output else None,
                "error": data.get("error"),
            }
        )
    _write_item(connection, job_id, item.index, item)
    return counts.moved(old, item.status)


def _write_item(connection: Connection, job_id: str, index: int, item: JobItem) -> None:
    connection.execute(
        update(job_items)
        .where(job_items.c.job_id == job_id, job_items.c.idx == index)
        .values(status=item.status, data=item.model_dump(mode="json"))
    )
