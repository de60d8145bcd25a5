"""Deleting a thread so that nothing of it is left (docs/deletion.md); a tenant's deletion
(tenant_deletion.py) and a task's attempt threads (task_deletion.py) go through it too.

A thread's deletion runs in an order that a crash at any point leaves resumable: deleting
the thread again finishes the job.

1. Close it: the `terminate` signal (a soft shutdown that also closes its subagents),
   waited for up to `grace` seconds; then Temporal's terminate. A closed thread's store
   row fences off the writes of any activity still in flight (store/outcome_fence.py).
2. With `children`, each child in the same way, depth first, before its parent: the
   parent's rows are how the children are found, so they go last.
3. Its store rows, idempotency records and the blobs nobody else refers to, in one
   transaction (store/deletion.py).
4. Every Temporal execution of its id (each run, as visibility lists them, and the
   current one), waited for until Temporal no longer describes or lists any.

A thread nothing is left of, in the store or in Temporal, is `ThreadNotFound`: a retry of
a finished deletion says so, the same way for every caller (the HTTP API's 404).
"""

from __future__ import annotations

import asyncio
import re

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from weft.activities.deletion_report import (
    DeletedKind,
    DeletionReport,
    JobDeleted,
    TaskDeleted,
    ThreadDeleted,
    audit_deletion,
    audited_deletion,
)
from weft.contract.thread import SIGNAL_TERMINATE
from weft.store import Store

# How long a thread may take to close after the terminate signal before it is terminated
# outright (a thread with no worker never answers the signal).
DEFAULT_GRACE_SECONDS = 30.0
# How long Temporal may take to forget a deleted execution (describe and visibility).
FORGET_TIMEOUT_SECONDS = 60.0
DELETE_REASON = "thread deleted"
# A thread id: 1 to 255 characters, no control characters.
_THREAD_ID = re.compile(r"^[^\x00-\x1f\x7f]{1,255}$")
# One that can go into a visibility query as a string literal; another is found by
# `describe` alone (its current run).
_QUERY_SAFE = re.compile(r"^[^'\"\\]*$")


class ThreadNotFound(LookupError):
    """Nothing of the thread is left, in the store or in Temporal."""


def check_thread_id(thread_id: str) -> str:
    """`thread_id` if it can name a thread, else ValueError naming it."""
    if not _THREAD_ID.fullmatch(thread_id):
        raise ValueError(f"thread id {thread_id!r}: 1 to 255 characters, no control characters")
    return thread_id


async def delete_thread(
    client: Client,
    store: Store,
    thread_id: str,
    *,
    children: bool = False,
    grace: float = DEFAULT_GRACE_SECONDS,
    audit_subject: str | None = None,
) -> DeletionReport:
    """Delete the thread (and with `children`, its subagents, recursively) from Temporal
    and the store; `ThreadNotFound` when nothing of it is left.

    `audit_subject` (`cli`, `python`…) records the deletion in the audit log; the HTTP API
    records its requests itself and passes None.
    """
    check_thread_id(thread_id)
    if not await _known(client, store, thread_id) or await _work_of(store, thread_id):
        raise ThreadNotFound(f"no thread {thread_id!r}")
    return await audited_deletion(
        store,
        "thread",
        thread_id,
        tenant_of=store.threads.tenant,
        delete=lambda report: delete_tree(
            client, store, thread_id, children, grace, report, seen=set()
        ),
        audit_subject=audit_subject,
    )


async def delete_tree(
    client: Client,
    store: Store,
    thread_id: str,
    children: bool,
    grace: float,
    report: DeletionReport,
    seen: set[str],
) -> None:
    """Delete the thread (with `children`, its subagents first, skipping those in `seen`),
    adding it to `report` and `seen`."""
    seen.add(thread_id)
    await close_thread(client, thread_id, grace)
    if children:
        for child in await asyncio.to_thread(store.deletion.children, thread_id):
            if child not in seen and _THREAD_ID.fullmatch(child):
                await delete_tree(client, store, child, True, grace, report, seen)
    rows = await asyncio.to_thread(store.deletion.delete_thread, thread_id)
    executions = await delete_executions(client, thread_id)
    report.threads.append(
        ThreadDeleted(
            thread_id=thread_id,
            rows=rows.rows,
            idempotency_keys=rows.idempotency_keys,
            blobs=rows.blobs,
            executions=executions,
        )
    )


async def close_thread(client: Client, thread_id: str, grace: float) -> None:
    """Ask the thread to terminate and wait up to `grace` seconds for it to close, then
    terminate its workflow outright; nothing for a closed or unknown thread."""
    handle = client.get_workflow_handle(thread_id)
    if await workflow_status(client, thread_id) != WorkflowExecutionStatus.RUNNING:
        return
    try:
        await handle.signal(SIGNAL_TERMINATE, {"reason": DELETE_REASON})
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:  # closed meanwhile
            raise
    if await closed_within(client, thread_id, grace):
        return
    try:
        await handle.terminate(reason=DELETE_REASON)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    if not await closed_within(client, thread_id, FORGET_TIMEOUT_SECONDS):
        raise RuntimeError(f"thread {thread_id!r} did not close after terminate; retry")


async def delete_executions(client: Client, thread_id: str) -> int:
    """Delete every Temporal execution of `thread_id` and wait until Temporal neither
    describes nor lists one; the number of runs deleted."""
    asked: set[str] = set()
    deadline = asyncio.get_running_loop().time() + FORGET_TIMEOUT_SECONDS
    delay = 0.05
    while True:
        runs = await _listed_runs(client, thread_id)
        current = await _current_run(client, thread_id)
        if current is not None:
            runs.add(current)
        if not runs:
            return len(asked)
        for run_id in sorted(r for r in runs - asked if r):
            await _delete_run(client, thread_id, run_id)
            asked.add(run_id)
        if asyncio.get_running_loop().time() > deadline:
            raise RuntimeError(
                f"Temporal still holds {len(runs)} execution(s) of thread {thread_id!r}; "
                "deleting it again finishes the job"
            )
        # Temporal deletes in the background: wait for it to forget, then look again.
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.25)


async def _delete_run(client: Client, thread_id: str, run_id: str) -> None:
    request = DeleteWorkflowExecutionRequest(
        namespace=client.namespace,
        workflow_execution=WorkflowExecution(workflow_id=thread_id, run_id=run_id),
    )
    try:
        await client.workflow_service.delete_workflow_execution(request)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:  # not found: deleted already
            raise


async def _known(client: Client, store: Store, thread_id: str) -> bool:
    if await asyncio.to_thread(store.deletion.known, thread_id):
        return True
    return await temporal_knows(client, thread_id)


async def _work_of(store: Store, thread_id: str) -> bool:
    """Whether the id is a task's or a job's (their logs share the events table): a
    thread's deletion would take their logs, so it is no thread (`weft task delete`)."""
    if await asyncio.to_thread(store.threads.tenant, thread_id) is not None:
        return False
    if await asyncio.to_thread(store.deletion.task_known, thread_id):
        return True
    return await asyncio.to_thread(store.deletion.job_known, thread_id)


async def temporal_knows(client: Client, workflow_id: str) -> bool:
    """Whether Temporal describes or lists any execution of `workflow_id`."""
    if await _current_run(client, workflow_id) is not None:
        return True
    return bool(await _listed_runs(client, workflow_id))


async def _listed_runs(client: Client, thread_id: str) -> set[str]:
    """The run ids visibility lists for the thread's id (none for an id a query cannot
    quote: its current run is still found by `describe`)."""
    if not _QUERY_SAFE.fullmatch(thread_id):
        return set()
    return {w.run_id async for w in client.list_workflows(f"WorkflowId = '{thread_id}'")}


async def _current_run(client: Client, thread_id: str) -> str | None:
    try:
        described = await client.get_workflow_handle(thread_id).describe()
    except RPCError as err:
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            return None
        raise
    return described.run_id


async def workflow_status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    """The status of the workflow's current run; None when Temporal knows none."""
    try:
        described = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            return None
        raise
    return described.status


async def closed_within(client: Client, workflow_id: str, timeout: float) -> bool:
    """Whether the workflow's current run is closed (or unknown) within `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    delay = 0.05
    while await workflow_status(client, workflow_id) == WorkflowExecutionStatus.RUNNING:
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)
    return True


__all__ = [
    "DEFAULT_GRACE_SECONDS",
    "FORGET_TIMEOUT_SECONDS",
    "DeletedKind",
    "DeletionReport",
    "JobDeleted",
    "TaskDeleted",
    "ThreadDeleted",
    "ThreadNotFound",
    "audit_deletion",
    "audited_deletion",
    "check_thread_id",
    "close_thread",
    "closed_within",
    "delete_executions",
    "delete_thread",
    "delete_tree",
    "temporal_knows",
    "workflow_status",
]
