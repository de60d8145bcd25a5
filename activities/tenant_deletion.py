"""Deleting a tenant: its jobs, tasks and threads, then its API keys, quota and retention
policy (docs/deletion.md).

The tenant's open jobs and tasks are cancelled first, all of them before any is deleted,
so no job starts an item, and no task an attempt, for a tenant being deleted. Then each
job goes with its items' tasks, each other task (its edges to the tenant's own tasks need
no recording: those go too), and every thread of the tenant, children included (the
attempts' threads among them).
"""

from __future__ import annotations

import asyncio
import contextlib

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from weft.activities.task_deletion import delete_one_job, delete_one_task
from weft.activities.thread_deletion import (
    DEFAULT_GRACE_SECONDS,
    DeletionReport,
    audited_deletion,
    check_thread_id,
    delete_tree,
    temporal_knows,
)
from weft.contract.jobs import SIGNAL_CANCEL_JOB
from weft.contract.tasks import SIGNAL_CANCEL_TASK
from weft.contract.tenants import check_tenant, tenant_clause
from weft.contract.thread import WORKFLOW_TYPE
from weft.store import Store


async def delete_tenant(
    client: Client,
    store: Store,
    tenant: str,
    *,
    grace: float = DEFAULT_GRACE_SECONDS,
    audit_subject: str | None = None,
) -> DeletionReport:
    """Delete every job, task and thread of `tenant` (threads in the store or in
    Temporal's visibility, their children included), then its API keys, quota and
    retention policy."""
    check_tenant(tenant)
    return await audited_deletion(
        store,
        "tenant",
        tenant,
        tenant_of=lambda deleted: deleted,  # the audit names the tenant deleted
        delete=lambda report: _delete_everything(client, store, tenant, grace, report),
        audit_subject=audit_subject,
    )


async def _delete_everything(
    client: Client, store: Store, tenant: str, grace: float, report: DeletionReport
) -> None:
    """The tenant's work cancelled, then its jobs, tasks, threads and records deleted;
    added to `report`."""
    report.cancelled = await _cancel_work(client, store, tenant, grace)
    job_ids, _ = await asyncio.to_thread(store.deletion.tenant_work, tenant)
    for job_id in job_ids:
        await delete_one_job(client, store, job_id, False, grace, report)
    _, task_ids = await asyncio.to_thread(store.deletion.tenant_work, tenant)
    for task_id in task_ids:
        if await asyncio.to_thread(store.deletion.task_known, task_id) or await temporal_knows(
            client, task_id
        ):
            await delete_one_task(client, store, task_id, False, grace, report, set(task_ids))
    stored = await asyncio.to_thread(store.deletion.tenant_threads, tenant)
    listed = [w.id async for w in client.list_workflows(_tenant_query(tenant))]
    seen = {t.thread_id for t in report.threads}
    for thread_id in sorted(set(stored) | set(listed)):
        if thread_id not in seen and _thread_id_ok(thread_id):
            await delete_tree(client, store, thread_id, True, grace, report, seen)
    report.api_keys = await asyncio.to_thread(store.deletion.delete_tenant_records, tenant)
    report.cancelled = list(dict.fromkeys(report.cancelled))  # asked again if still open


def _tenant_query(tenant: str) -> str:
    """The tenant's threads; tasks, jobs and schedules' workflows are not threads."""
    return f"WorkflowType = '{WORKFLOW_TYPE}' AND {tenant_clause(tenant)}"


def _thread_id_ok(thread_id: str) -> bool:
    try:
        check_thread_id(thread_id)
    except ValueError:
        return False
    return True


async def _cancel_work(client: Client, store: Store, tenant: str, grace: float) -> list[str]:
    """Cancel the tenant's jobs and tasks that have not ended, all before any is deleted: a
    running job would otherwise go on starting items (and their threads) for a tenant being
    deleted. The ids cancelled."""
    jobs = await asyncio.to_thread(store.jobs.list, tenant=tenant, limit=100_000)
    tasks = await asyncio.to_thread(store.tasks.list, tenant=tenant, limit=100_000)
    open_runs = [(job.job_id, SIGNAL_CANCEL_JOB) for job in jobs if not job.terminal] + [
        (task.task_id, SIGNAL_CANCEL_TASK) for task in tasks if not task.terminal
    ]
    cancelled: list[str] = []
    for run_id, signal in open_runs:
        try:
            await client.get_workflow_handle(run_id).signal(
                signal, {"reason": f"tenant {tenant} deleted"}
            )
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:  # already ended: nothing to stop
                raise
        else:
            cancelled.append(run_id)
    for run_id in cancelled:  # ended before the threads are listed: none starts after
        with contextlib.suppress(Exception):  # ended cancelled, or still ending: go on
            await asyncio.wait_for(client.get_workflow_handle(run_id).result(), grace)
    return cancelled


__all__ = ["delete_tenant"]
