"""Whom `weft task …` and `weft job …` act for, and who they are in the audit log: the one
place these commands learn both (docs/tenants.md).

Under `weft --tenant T` (`thread_guard.confine_to_tenant`) a task or job of another tenant
is `no task 'x'` (`no job 'x'`), worded exactly as an unknown one, before anything of it
is read or done; listings are T's, creates are T's, and a dependency must be one of T's
tasks. Without it the CLI is the operator, over every tenant.

Each control action (a create, a command, a cancel, a run, …) is recorded once in the
audit log, as `cli:<os user>`, with the tenant of the task or job acted on, once its outcome
is known (client/audit_trail.py). Deletions are not recorded here: `Tasks.delete` and
`Jobs.delete` record them themselves (`audit_as`).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass

from temporalio.client import Client

from weft.cli.temporal_client import client_from_config
from weft.cli.thread_guard import cli_subject
from weft.client.audit_trail import AuditTrail, ControlAction, Outcome
from weft.contract.jobs import JobNotFound
from weft.contract.tasks import TaskError, TaskNotFound
from weft.store import Store
from weft.workers.config import WeftConfig


@dataclass(frozen=True)
class RecordKind:
    """A kind of record a tenant owns outside threads: how its tenant is read, and the
    refusal an unknown one gets (which another tenant's gets too)."""

    noun: str  # "task", "job": also the audit route's `{<noun>_id}` parameter
    tenant_of: Callable[[Store, str], str | None]
    not_found: Callable[[str], Exception]


TASK = RecordKind("task", lambda store, task_id: store.tasks.tenant(task_id), TaskNotFound)
JOB = RecordKind("job", lambda store, job_id: store.jobs.tenant(job_id), JobNotFound)


class TenantScope:
    """What one CLI command may reach (every tenant's records, or one tenant's) over
    `store`, and its audit trail."""

    def __init__(self, client: Client, store: Store, tenant: str | None) -> None:
        self.client = client
        self.store = store
        self.tenant = tenant  # None: the operator, over every tenant
        self._trail = AuditTrail(store, cli_subject(), client=client)

    async def owner(self, kind: RecordKind, record_id: str) -> str | None:
        """The tenant of the task or job (None: unknown); under `--tenant`, one of another
        tenant, or unknown, is refused as unknown: the CLI acting for a tenant never
        learns whether another tenant's record exists."""
        theirs = await asyncio.to_thread(kind.tenant_of, self.store, record_id)
        if self.tenant is not None and theirs != self.tenant:
            raise kind.not_found(f"no {kind.noun} {record_id!r}")
        return theirs

    async def own_tasks(self, field: str, task_ids: Iterable[str]) -> None:
        """Under `--tenant`, TaskError naming `field` unless each task is the tenant's,
        worded as for an unknown task (as the HTTP API words a tenant's key's body)."""
        for task_id in task_ids:
            try:
                await self.owner(TASK, task_id)
            except TaskNotFound:
                raise TaskError(f"{field}: no task {task_id!r}", field=field) from None

    @asynccontextmanager
    async def acting(
        self, action: ControlAction, kind: RecordKind, record_id: str
    ) -> AsyncIterator[Outcome]:
        """The body as `action` on the task or job, recorded with its tenant once its
        outcome is known; another tenant's (under `--tenant`) is refused before, unrecorded,
        as a thread of another tenant is."""
        owner = await self.owner(kind, record_id)
        params = {f"{kind.noun}_id": record_id}
        async with self._trail.acting(action, tenant=owner, **params) as outcome:
            yield outcome

    def creating(
        self, action: ControlAction, tenant: str | None
    ) -> AbstractAsyncContextManager[Outcome]:
        """The body as `action` making a record of `tenant` (the body may set
        `outcome.tenant` when only the creation tells: a job made for a thread)."""
        return self._trail.acting(action, tenant=tenant)


@asynccontextmanager
async def tenant_scope(args: argparse.Namespace, config: WeftConfig) -> AsyncIterator[TenantScope]:
    """The scope of a task or job command: the configured Temporal and store, and the
    tenant the CLI acts for (`args.acting_tenant`, set by `confine_to_tenant`)."""
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        yield TenantScope(client, store, getattr(args, "acting_tenant", None))
    finally:
        store.close()


__all__ = ["JOB", "TASK", "RecordKind", "TenantScope", "tenant_scope"]
