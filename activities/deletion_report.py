"""What a deletion did (`DeletionReport`, the CLI's `--json` and the HTTP reply), and the
one shape every deletion (thread, task, job, tenant) runs in: read the tenant, delete,
record the deletion in the audit log (`audited_deletion`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from weft.store import Store
from weft.store.audit import AuditEntry

log = logging.getLogger(__name__)


@dataclass
class ThreadDeleted:
    """One thread's deletion: its store rows (by table), idempotency records and blobs
    deleted, and its Temporal executions deleted."""

    thread_id: str
    rows: dict[str, int] = field(default_factory=dict)
    idempotency_keys: int = 0
    blobs: int = 0
    executions: int = 0


@dataclass
class TaskDeleted:
    """One task's deletion: its store rows (by table) and idempotency records, its Temporal
    runs, and the tasks that depended on it and lost that edge (`unlinked`)."""

    task_id: str
    rows: dict[str, int] = field(default_factory=dict)
    idempotency_keys: int = 0
    executions: int = 0
    unlinked: list[str] = field(default_factory=list)


@dataclass
class JobDeleted:
    """One job's deletion: its store rows (by table: its row, items and log) and
    idempotency records, and its Temporal runs (its continue-as-new chain)."""

    job_id: str
    rows: dict[str, int] = field(default_factory=dict)
    idempotency_keys: int = 0
    executions: int = 0


@dataclass
class DeletionReport:
    """What a deletion did: every thread deleted, children before their parent; the tasks
    and jobs deleted (activities/task_deletion.py), and those cancelled first."""

    threads: list[ThreadDeleted] = field(default_factory=list)
    api_keys: int = 0
    cancelled: list[str] = field(default_factory=list)  # jobs and tasks stopped first
    tasks: list[TaskDeleted] = field(default_factory=list)
    jobs: list[JobDeleted] = field(default_factory=list)
    schedules: list[str] = field(default_factory=list)  # a tenant's, deleted first

    @property
    def thread_ids(self) -> list[str]:
        return [t.thread_id for t in self.threads]

    def wire(self) -> dict[str, object]:
        """As JSON (the CLI's `--json`, the HTTP reply)."""
        return {
            "deleted": [
                {
                    "threadId": t.thread_id,
                    "rows": t.rows,
                    "idempotencyKeys": t.idempotency_keys,
                    "blobs": t.blobs,
                    "executions": t.executions,
                }
                for t in self.threads
            ],
            **({"apiKeys": self.api_keys} if self.api_keys else {}),
            **({"cancelled": self.cancelled} if self.cancelled else {}),
            **({"tasks": [_task_wire(t) for t in self.tasks]} if self.tasks else {}),
            **({"jobs": [_job_wire(j) for j in self.jobs]} if self.jobs else {}),
            **({"schedules": self.schedules} if self.schedules else {}),
        }


def _task_wire(task: TaskDeleted) -> dict[str, object]:
    return {
        "taskId": task.task_id,
        "rows": task.rows,
        "idempotencyKeys": task.idempotency_keys,
        "executions": task.executions,
        "unlinked": task.unlinked,
    }


def _job_wire(job: JobDeleted) -> dict[str, object]:
    return {
        "jobId": job.job_id,
        "rows": job.rows,
        "idempotencyKeys": job.idempotency_keys,
        "executions": job.executions,
    }


# What can be deleted, and the name of its id in its HTTP route (`/threads/{thread_id}`).
DeletedKind = Literal["thread", "task", "job", "tenant"]
_ROUTE_PARAMETERS: dict[DeletedKind, str] = {
    "thread": "thread_id",
    "task": "task_id",
    "job": "job_id",
    "tenant": "tenant",
}


async def audited_deletion(
    store: Store,
    kind: DeletedKind,
    id_: str,
    *,
    tenant_of: Callable[[str], str | None],
    delete: Callable[[DeletionReport], Awaitable[None]],
    audit_subject: str | None,
) -> DeletionReport:
    """Run `delete` (its refusals checked by the caller) into a new report and, with an
    `audit_subject`, record it in the audit log as a deletion of `tenant_of(id_)`'s
    `kind`: the tenant is read before anything goes (the rows it is read from go too).
    The HTTP API records its requests itself and passes None."""
    tenant = None
    if audit_subject is not None:
        tenant = await asyncio.to_thread(tenant_of, id_)
    report = DeletionReport()
    await delete(report)
    if audit_subject is not None:
        route = f"/{kind}s/{{{_ROUTE_PARAMETERS[kind]}}}"
        thread_id = id_ if kind == "thread" else None
        await audit_deletion(store, audit_subject, tenant, thread_id, route, f"/{kind}s/{id_}")
    return report


async def audit_deletion(
    store: Store,
    subject: str,
    tenant: str | None,
    thread_id: str | None,
    route: str,
    path: str,
) -> None:
    """Record a deletion by `subject` (`cli:<user>`, `python`) of `tenant`'s thread, task,
    job or whole tenant in the audit log: ids, no content."""
    entry = AuditEntry(
        at=datetime.now(UTC),
        subject=subject,
        tenant=tenant,
        method="DELETE",
        route=route,
        path=path,
        thread_id=thread_id,
        status=200,
    )
    try:
        await asyncio.to_thread(store.audit.record, entry)
    except Exception:
        # The deletion is done: a lost record must not turn it into an error (as over
        # HTTP and in client/audit_trail.py); it is logged instead.
        log.exception("could not record the deletion of %s by %s", path, subject)


__all__ = [
    "DeletedKind",
    "DeletionReport",
    "JobDeleted",
    "TaskDeleted",
    "ThreadDeleted",
    "audit_deletion",
    "audited_deletion",
]
