"""Deleting a thread's rows from every table, and the blobs nothing else refers to.

`delete_thread` removes, in one transaction under the thread's lock, every row a thread
owns: each column of the schema that names a thread (`thread_id`, `*_thread_id`) is either
in `DELETED` (rows with the thread there go) or in `KEPT` with the reason it is not the
thread's data (`uncovered` lists any column in neither, and a test fails on it, so a new
table cannot be forgotten). The HTTP API's idempotency records of the thread go too: they
name it only in their scope (`POST /threads/{id}/…`) or, for the start, in their reply.

Blobs are content-addressed and shared (a copied or forked file points at the same
bytes), so a blob the thread referred to is deleted in the same transaction only when no
surviving `files` or `file_history` row refers to it. A blob a spilled queued message
travelled as (`metadata.contentRef`) is deleted with the thread too: the stored message
holds its whole content, so the blob was needed only until the message was stored.

One transaction per thread makes a thread's deletion all or nothing: a crash leaves the
thread whole or gone, and deleting it again finishes the job (client/deletion.py).

Tasks and jobs keep their logs under their own ids (the `events` table's `thread_id` is the
log key), so a task's rows are its `tasks` row, its log and the HTTP API's idempotency
records of requests on it; a job's are its `jobs` row, its `job_items`, its log and its
idempotency records. Each goes in one transaction too (`delete_task`, `delete_job`);
activities/task_deletion.py does the rest (cancelling, dependents, Temporal).
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Column, Connection, MetaData, Table, delete, exists, or_, select

from weft.contract.tasks import TaskRecord
from weft.store.database import Database
from weft.store.jobs import job_items, jobs
from weft.store.tables import (
    api_keys,
    blobs,
    budgets,
    context_boundaries,
    effects,
    events,
    file_history,
    files,
    idempotency_keys,
    kv,
    kv_history,
    message_history,
    messages,
    metadata,
    retention_policies,
    subagents,
    tasks,
    tenant_quotas,
    thread_links,
    threads,
    transcript_revisions,
    variable_requests,
)

# Where a thread's rows are: (table, the column naming the thread). Rows go in this order;
# `threads` last, so a row of the thread is the last thing a reader can find of it.
DELETED: tuple[tuple[Table, str], ...] = (
    (messages, "thread_id"),
    (message_history, "thread_id"),
    (transcript_revisions, "thread_id"),
    (events, "thread_id"),
    (kv, "thread_id"),
    (kv_history, "thread_id"),
    (files, "thread_id"),
    (file_history, "thread_id"),
    (context_boundaries, "thread_id"),
    (effects, "thread_id"),
    # The thread's own subagent registry; a child's own rows are its own thread's.
    (subagents, "parent_thread_id"),
    (variable_requests, "parent_thread_id"),
    # The ledger of the tree the thread is the root of (a child's is its root's).
    (budgets, "root_thread_id"),
    (thread_links, "thread_id"),
    (threads, "thread_id"),
)

# Columns that name a thread but are another thread's or nobody's data, and why they stay.
KEPT: dict[tuple[str, str], str] = {
    ("threads", "parent_thread_id"): (
        "a surviving child's record of its parent: an id, no content"
    ),
    ("thread_links", "successor_thread_id"): (
        "a surviving source's record of the thread that replaced it after a rewind: an id"
    ),
    ("audit_log", "thread_id"): (
        "who did what to the thread, the deletion included: ids, routes and statuses, never content"
    ),
}


def thread_columns(schema: MetaData = metadata) -> builtins.list[tuple[str, str]]:
    """Every (table, column) of `schema` that names a thread, by name."""
    return sorted(
        (table.name, column.name)
        for table in schema.tables.values()
        for column in table.columns
        if column.name == "thread_id" or column.name.endswith("_thread_id")
    )


def uncovered(schema: MetaData = metadata) -> builtins.list[str]:
    """The thread columns of `schema` that deletion neither deletes by nor keeps, as
    `table.column`: each must be added to `DELETED` or, with a reason, to `KEPT`."""
    covered = {(table.name, column) for table, column in DELETED} | set(KEPT)
    return [f"{t}.{c}" for t, c in thread_columns(schema) if (t, c) not in covered]


@dataclass
class ThreadRowsDeleted:
    """What `delete_thread` removed: rows by table, idempotency records, and blobs."""

    thread_id: str
    rows: dict[str, int] = field(default_factory=dict)
    idempotency_keys: int = 0
    blobs: int = 0

    @property
    def total(self) -> int:
        return sum(self.rows.values()) + self.idempotency_keys + self.blobs


@dataclass
class WorkRowsDeleted:
    """What `delete_task` or `delete_job` removed: rows by table, idempotency records."""

    work_id: str
    rows: dict[str, int] = field(default_factory=dict)
    idempotency_keys: int = 0


class Deletion:
    """Deletes threads, tasks and jobs from the store (docs/deletion.md)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def known(self, thread_id: str) -> bool:
        """Whether any row of the thread is left in any of its tables."""
        with self._db.read() as connection:
            return any(
                connection.scalar(
                    select(table.c[column]).where(_by(table, column, thread_id)).limit(1)
                )
                is not None
                for table, column in DELETED
            )

    def children(self, thread_id: str) -> builtins.list[str]:
        """The thread's direct children: its subagent registry's, and the threads whose row
        names it as their parent (a child that has not reported yet), sorted."""
        with self._db.read() as connection:
            found = set(
                connection.scalars(
                    select(subagents.c.reference).where(subagents.c.parent_thread_id == thread_id)
                )
            )
            found.update(
                connection.scalars(
                    select(threads.c.thread_id).where(threads.c.parent_thread_id == thread_id)
                )
            )
        found.discard(thread_id)
        return sorted(found)

    def tenant_threads(self, tenant: str) -> builtins.list[str]:
        """The ids of every stored thread of `tenant`, sorted."""
        with self._db.read() as connection:
            return sorted(
                connection.scalars(select(threads.c.thread_id).where(threads.c.tenant == tenant))
            )

    def delete_tenant_records(self, tenant: str) -> int:
        """Delete what `tenant` has beside its threads: its API keys, its quota and spend,
        its retention policy. The number of API keys deleted."""
        with self._db.write() as connection:
            connection.execute(delete(tenant_quotas).where(tenant_quotas.c.tenant == tenant))
            connection.execute(
                delete(retention_policies).where(retention_policies.c.tenant == tenant)
            )
            return int(
                connection.execute(delete(api_keys).where(api_keys.c.tenant == tenant)).rowcount
            )

    def delete_thread(self, thread_id: str) -> ThreadRowsDeleted:
        """Delete every row of the thread, its idempotency records and the blobs nobody
        else refers to, in one transaction. Deleting a deleted thread deletes nothing."""

        def work(connection: Connection) -> ThreadRowsDeleted:
            self._db.lock_thread(connection, thread_id)
            done = ThreadRowsDeleted(thread_id)
            candidates = _blobs_of(connection, thread_id)
            for table, column in DELETED:
                result = connection.execute(delete(table).where(_by(table, column, thread_id)))
                if result.rowcount:
                    done.rows[table.name] = done.rows.get(table.name, 0) + int(result.rowcount)
            done.idempotency_keys = _delete_idempotency(connection, thread_id)
            done.blobs = _delete_unreferenced(self._db, connection, candidates)
            return done

        return self._db.write_retrying(work)

    # -- tasks and jobs -------------------------------------------------------------

    def task_known(self, task_id: str) -> bool:
        """Whether the task's row or any `task.*` event of its log is left."""
        return self._work_known(tasks.c.task_id, task_id, "task.")

    def job_known(self, job_id: str) -> bool:
        """Whether the job's row, an item or any `job.*` event of its log is left."""
        if self._work_known(jobs.c.job_id, job_id, "job."):
            return True
        with self._db.read() as connection:
            query = select(job_items.c.idx).where(job_items.c.job_id == job_id).limit(1)
            return connection.scalar(query) is not None

    def job_of_task(self, task_id: str) -> str | None:
        """The job whose item the task runs, as its `task.created` says (None: not an
        item's task, or its log is gone)."""
        query = (
            select(events.c.data)
            .where(events.c.thread_id == task_id, events.c.type == "task.created")
            .limit(1)
        )
        with self._db.read() as connection:
            data = connection.scalar(query)
        job_id = data.get("jobId") if isinstance(data, dict) else None
        return str(job_id) if job_id else None

    def dependents(self, task_id: str) -> builtins.list[TaskRecord]:
        """Every task, ended or not, whose dependencies name `task_id`."""
        with self._db.read() as connection:
            rows = connection.scalars(select(tasks.c.data))
            return [
                TaskRecord.model_validate(d)
                for d in rows
                if task_id in (d.get("dependencies") or [])
            ]

    def tenant_work(self, tenant: str) -> tuple[builtins.list[str], builtins.list[str]]:
        """The ids of every stored job and task of `tenant`, each sorted."""
        with self._db.read() as connection:
            job_ids = connection.scalars(select(jobs.c.job_id).where(jobs.c.tenant == tenant))
            task_ids = connection.scalars(select(tasks.c.task_id).where(tasks.c.tenant == tenant))
            return sorted(job_ids), sorted(task_ids)

    def delete_task(self, task_id: str) -> WorkRowsDeleted:
        """Delete the task's row, its log and the idempotency records of requests on it, in
        one transaction. Deleting a deleted task deletes nothing."""

        def work(connection: Connection) -> WorkRowsDeleted:
            self._db.lock_thread(connection, task_id)  # its log's writers take this lock
            done = WorkRowsDeleted(task_id)
            _delete_rows(connection, done, events, events.c.thread_id == task_id)
            _delete_rows(connection, done, tasks, tasks.c.task_id == task_id)
            done.idempotency_keys = _delete_work_idempotency(connection, "tasks", task_id)
            return done

        return self._db.write_retrying(work)

    def delete_job(self, job_id: str) -> WorkRowsDeleted:
        """Delete the job's items, its log, its row and the idempotency records of requests
        on it, in one transaction (its items' tasks are deleted before, one by one)."""

        def work(connection: Connection) -> WorkRowsDeleted:
            self._db.lock_thread(connection, job_id)
            done = WorkRowsDeleted(job_id)
            _delete_rows(connection, done, job_items, job_items.c.job_id == job_id)
            _delete_rows(connection, done, events, events.c.thread_id == job_id)
            _delete_rows(connection, done, jobs, jobs.c.job_id == job_id)
            done.idempotency_keys = _delete_work_idempotency(connection, "jobs", job_id)
            return done

        return self._db.write_retrying(work)

    def _work_known(self, key: Column[Any], work_id: str, event_prefix: str) -> bool:
        """Whether `key` names a row of `work_id`, or its log holds an event of its kind
        (a thread's events under the same id are not a task's or a job's)."""
        with self._db.read() as connection:
            row = connection.scalar(select(key).where(key == work_id).limit(1))
            if row is not None:
                return True
            query = (
                select(events.c.sequence)
                .where(
                    events.c.thread_id == work_id,
                    events.c.type.startswith(event_prefix, autoescape=True),
                )
                .limit(1)
            )
            return connection.scalar(query) is not None


def _delete_rows(connection: Connection, done: WorkRowsDeleted, table: Table, where: Any) -> None:
    """Delete `table`'s rows `where` says, counted in `done` by table (none: left out)."""
    result = connection.execute(delete(table).where(where))
    if result.rowcount:
        done.rows[table.name] = done.rows.get(table.name, 0) + int(result.rowcount)


def _delete_work_idempotency(connection: Connection, kind: str, work_id: str) -> int:
    """The idempotency records of requests on a task or job (`POST /tasks/{id}/…`), and of
    the `POST /tasks` (or `/jobs`) that created it: its reply is the record, which names it
    (`taskId`, `jobId`) and holds its objective."""
    scope = idempotency_keys.c.scope
    on_it = or_(
        scope == f"POST /{kind}/{work_id}",
        scope.startswith(f"POST /{kind}/{work_id}/", autoescape=True),
    )
    name = "taskId" if kind == "tasks" else "jobId"
    created = (scope == f"POST /{kind}") & (
        idempotency_keys.c.response[name].as_string() == work_id
    )
    result = connection.execute(delete(idempotency_keys).where(or_(on_it, created)))
    return int(result.rowcount)


def _by(table: Table, column: str, thread_id: str) -> Any:
    return table.c[column] == thread_id


def _blobs_of(connection: Connection, thread_id: str) -> set[str]:
    """The digests of the blobs the thread refers to: its files (now and before) and the
    content refs of its spilled queued messages (as stored, and as changed)."""
    digests: set[str] = set()
    for table in (files, file_history):
        digests.update(
            str(d)
            for d in connection.scalars(
                select(table.c.blob_digest).where(
                    table.c.thread_id == thread_id, table.c.blob_digest.is_not(None)
                )
            )
        )
    for meta in connection.scalars(
        select(messages.c.metadata).where(messages.c.thread_id == thread_id)
    ):
        digests.update(_content_refs([meta]))
    for message in connection.scalars(
        select(message_history.c.message).where(message_history.c.thread_id == thread_id)
    ):
        if isinstance(message, dict):
            digests.update(_content_refs([message.get("metadata")]))
    return digests


# How a queued message names the blob its content travelled as (activities/spill.py).
_CONTENT_REF = "contentRef"
_BLOB_REF_PREFIX = "blob:"


def _content_refs(metadatas: Iterable[Any]) -> set[str]:
    found: set[str] = set()
    for meta in metadatas:
        ref = meta.get(_CONTENT_REF) if isinstance(meta, dict) else None
        if isinstance(ref, str) and ref.startswith(_BLOB_REF_PREFIX):
            found.add(ref[len(_BLOB_REF_PREFIX) :])
    return found


def _delete_idempotency(connection: Connection, thread_id: str) -> int:
    """The idempotency records of requests on the thread (`POST /threads/{id}/…`), and of
    the `POST /threads` that started it (its reply names it)."""
    scope = idempotency_keys.c.scope
    on_thread = or_(
        scope == f"POST /threads/{thread_id}",
        scope.startswith(f"POST /threads/{thread_id}/", autoescape=True),
    )
    started = (scope == "POST /threads") & (
        idempotency_keys.c.response["threadId"].as_string() == thread_id
    )
    result = connection.execute(delete(idempotency_keys).where(or_(on_thread, started)))
    return int(result.rowcount)


def _delete_unreferenced(database: Database, connection: Connection, digests: set[str]) -> int:
    """Delete the blobs of `digests` that no `files` or `file_history` row refers to.

    On PostgreSQL the blobs are locked first (a file write takes a share lock on the blob
    it reuses, store/files.py), and only then counted: a write that reused one commits
    before the count, which then sees its row, or waits for this deletion and stores the
    bytes again. SQLite has one writer at a time.
    """
    if not digests:
        return 0
    wanted = sorted(digests)
    locked = select(blobs.c.digest).where(blobs.c.digest.in_(wanted))
    if database.postgres:
        locked = locked.with_for_update()
    present = list(connection.scalars(locked))
    gone = [d for d in present if not _referenced(connection, d)]
    if gone:
        connection.execute(delete(blobs).where(blobs.c.digest.in_(gone)))
    return len(gone)


def _referenced(connection: Connection, digest: str) -> bool:
    def refers(column: Column[Any]) -> Any:
        return exists().where(column == digest)

    return bool(
        connection.scalar(
            select(or_(refers(files.c.blob_digest), refers(file_history.c.blob_digest)))
        )
    )


__all__ = [
    "DELETED",
    "KEPT",
    "Deletion",
    "ThreadRowsDeleted",
    "WorkRowsDeleted",
    "thread_columns",
    "uncovered",
]
