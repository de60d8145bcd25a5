"""Deleting a task or a job so that nothing of it is left (docs/deletion.md).

A task's deletion runs in an order that a crash anywhere leaves resumable (deleting it
again finishes the job):

1. Refusals, before anything changes: a job's item's task goes with its job (`weft job
   delete`), and a task others depend on goes only with `force`.
2. Stop it: `cancel_task` (its run closes the running attempt's thread and ends the task
   `cancelled`), waited for up to `grace`; a run still open then is terminated, and the
   threads of its running attempts are closed here instead.
3. With `force`, each dependent loses its edge to it, recorded in the dependent's own log
   as `task.dependency.updated` (`change: removed`): through the dependent's run (`unlink`)
   while it waits on its dependencies, so the run stops waiting for a task that will never
   end; written to its log directly when it has ended or its attempts have begun (no run
   waits on the edge any more).
4. With `with_threads`, each attempt's thread and its subagents (thread_deletion.py).
5. Its store rows: the `tasks` row, its log, the idempotency records of requests on it,
   in one transaction (store/deletion.py). They go after the threads, because the row is
   how the attempts' threads are found.
6. Every Temporal run of its `TaskRun`, waited for until Temporal forgets them.

A job: stop it (`cancel_job`, which cancels its running items' tasks; then terminate),
delete each item's task as above (a few at a time), then its rows (items, log, row,
idempotency records: one transaction) and every run of its continue-as-new chain.

Nothing left of it, in the store or in Temporal: `TaskNotFound` / `JobNotFound`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from weft.activities.task_commands import TaskCommands, now_iso
from weft.activities.thread_deletion import (
    DEFAULT_GRACE_SECONDS,
    FORGET_TIMEOUT_SECONDS,
    DeletionReport,
    JobDeleted,
    TaskDeleted,
    ThreadNotFound,
    audited_deletion,
    close_thread,
    closed_within,
    delete_executions,
    delete_thread,
    temporal_knows,
    workflow_status,
)
from weft.contract.events import Event
from weft.contract.jobs import SIGNAL_CANCEL_JOB, JobError, JobNotFound, check_job_id
from weft.contract.tasks import (
    SIGNAL_CANCEL_TASK,
    TaskError,
    TaskNotFound,
    TaskRecord,
    check_task_id,
)
from weft.store import Store

DELETE_REASON = "deleted"


class DeletionRefused(TaskError):
    """The task cannot be deleted as asked, for what it is (a job's item) or what depends
    on it (without `force`); `field` names the input that would change that."""


# Items' tasks deleted at once: each waits on Temporal to forget its runs, so a few in
# parallel keep a job of hundreds of items to seconds, not minutes.
_ITEMS_AT_ONCE = 8
# How long a waiting dependent's run may take to remove its edge to a deleted task.
_UNLINK_TIMEOUT_SECONDS = 30.0
_ITEM_PAGE = 500


async def delete_task(
    client: Client,
    store: Store,
    task_id: str,
    *,
    force: bool = False,
    with_threads: bool = False,
    grace: float = DEFAULT_GRACE_SECONDS,
    audit_subject: str | None = None,
) -> DeletionReport:
    """Delete the task (cancelled first if open) from the store and Temporal; with
    `with_threads`, the threads its attempts ran too. `TaskNotFound` when nothing of it is
    left; `TaskError` naming `taskId` for a job's item's task, `force` for a task others
    depend on (with `force`, their edges to it are removed and recorded)."""
    try:
        check_task_id(task_id)
    except ValueError as err:
        raise TaskError(str(err), field="taskId") from None
    stored = await asyncio.to_thread(store.deletion.task_known, task_id)
    if not stored and not await temporal_knows(client, task_id):
        raise TaskNotFound(f"no task {task_id!r}")
    job_id = await asyncio.to_thread(store.deletion.job_of_task, task_id)
    if job_id is not None and await asyncio.to_thread(store.jobs.get, job_id) is not None:
        raise DeletionRefused(
            f"task {task_id} runs an item of job {job_id}: it is deleted with its job "
            f"(weft job delete {job_id})",
            field="taskId",
        )
    dependents = await asyncio.to_thread(store.deletion.dependents, task_id)
    if dependents and not force:
        names = ", ".join(d.task_id for d in dependents)
        raise DeletionRefused(
            f"task {task_id} is a dependency of {names}: pass force (--force) to delete it "
            "and remove their edges to it",
            field="force",
        )
    return await audited_deletion(
        store,
        "task",
        task_id,
        tenant_of=store.tasks.tenant,
        delete=lambda report: delete_one_task(
            client, store, task_id, with_threads, grace, report, doomed=()
        ),
        audit_subject=audit_subject,
    )


async def delete_job(
    client: Client,
    store: Store,
    job_id: str,
    *,
    with_threads: bool = False,
    grace: float = DEFAULT_GRACE_SECONDS,
    audit_subject: str | None = None,
) -> DeletionReport:
    """Delete the job (cancelled first if open), each item's task as `delete_task` does
    (`with_threads`: their attempts' threads too), its items, log and runs. `JobNotFound`
    when nothing of it is left."""
    try:
        check_job_id(job_id)
    except ValueError as err:
        raise JobError(str(err)) from None
    stored = await asyncio.to_thread(store.deletion.job_known, job_id)
    if not stored and not await temporal_knows(client, job_id):
        raise JobNotFound(f"no job {job_id!r}")
    return await audited_deletion(
        store,
        "job",
        job_id,
        tenant_of=store.jobs.tenant,
        delete=lambda report: delete_one_job(client, store, job_id, with_threads, grace, report),
        audit_subject=audit_subject,
    )


async def delete_one_job(
    client: Client,
    store: Store,
    job_id: str,
    with_threads: bool,
    grace: float,
    report: DeletionReport,
) -> None:
    """The job's deletion, its refusals checked; added to `report`."""
    if await _stop(client, job_id, SIGNAL_CANCEL_JOB, grace) is not None:
        report.cancelled.append(job_id)
    gate = asyncio.Semaphore(_ITEMS_AT_ONCE)

    async def item_task(task_id: str) -> None:
        async with gate:
            stored = await asyncio.to_thread(store.deletion.task_known, task_id)
            if stored or await temporal_knows(client, task_id):
                await delete_one_task(client, store, task_id, with_threads, grace, report, ())

    after = -1
    while page := await asyncio.to_thread(store.jobs.items, job_id, after=after, limit=_ITEM_PAGE):
        await asyncio.gather(*(item_task(item.task_id) for item in page))
        after = page[-1].index
    rows = await asyncio.to_thread(store.deletion.delete_job, job_id)
    executions = await delete_executions(client, job_id)
    report.jobs.append(
        JobDeleted(
            job_id=job_id,
            rows=rows.rows,
            idempotency_keys=rows.idempotency_keys,
            executions=executions,
        )
    )


async def delete_one_task(
    client: Client,
    store: Store,
    task_id: str,
    with_threads: bool,
    grace: float,
    report: DeletionReport,
    doomed: Collection[str],
) -> None:
    """The task's deletion, its refusals checked; added to `report`. Dependents in
    `doomed` (being deleted too) keep their edge: nothing is recorded on them."""
    stopped = await _stop(client, task_id, SIGNAL_CANCEL_TASK, grace)
    if stopped is not None:
        report.cancelled.append(task_id)
    record = await asyncio.to_thread(store.tasks.get, task_id)
    # A thread the task ran in without starting it (`runIn`) is not the task's to close or
    # delete: it lives on after the task.
    given = record.run_in.thread_id if record is not None and record.run_in else None
    if stopped == "terminated" and record is not None:
        # Its run did not close its attempt's thread: close it here, so nothing runs on.
        for attempt in record.attempts:
            if attempt.status == "running" and attempt.thread_id != given:
                await close_thread(client, attempt.thread_id, grace)
    unlinked: list[str] = []
    for dependent in await asyncio.to_thread(store.deletion.dependents, task_id):
        if dependent.task_id not in doomed:
            await _unlink(client, store, dependent, task_id)
            unlinked.append(dependent.task_id)
    if with_threads and record is not None:
        for attempt in record.attempts:
            if attempt.thread_id == given:
                continue
            try:
                done = await delete_thread(client, store, attempt.thread_id, children=True)
            except ThreadNotFound:
                continue  # deleted already (by an earlier, interrupted deletion)
            report.threads.extend(done.threads)
    rows = await asyncio.to_thread(store.deletion.delete_task, task_id)
    executions = await delete_executions(client, task_id)
    report.tasks.append(
        TaskDeleted(
            task_id=task_id,
            rows=rows.rows,
            idempotency_keys=rows.idempotency_keys,
            executions=executions,
            unlinked=unlinked,
        )
    )


async def _stop(client: Client, run_id: str, signal: str, grace: float) -> str | None:
    """Cancel the workflow if it runs, and wait up to `grace` for it to close; terminated
    if it has not. None when it was not running, else `cancelled` or `terminated`."""
    if await workflow_status(client, run_id) != WorkflowExecutionStatus.RUNNING:
        return None
    handle = client.get_workflow_handle(run_id)
    try:
        await handle.signal(signal, {"reason": DELETE_REASON})
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:  # closed meanwhile
            raise
        return None
    if await closed_within(client, run_id, grace):
        return "cancelled"
    try:
        await handle.terminate(reason=DELETE_REASON)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
    if not await closed_within(client, run_id, FORGET_TIMEOUT_SECONDS):
        raise RuntimeError(f"{run_id} did not close after terminate; retry")
    return "terminated"


async def _unlink(client: Client, store: Store, dependent: TaskRecord, task_id: str) -> None:
    """Remove `dependent`'s edge to `task_id`, recorded in its log: by its run while it
    waits (the run stops waiting), else written to its log directly."""
    reason = f"task {task_id} was deleted"
    if not dependent.terminal:
        unlink = TaskCommands(client, store).unlink(dependent.task_id, task_id, reason=reason)
        try:
            await asyncio.wait_for(unlink, _UNLINK_TIMEOUT_SECONDS)
            return
        except TaskError:
            pass  # its attempts have begun, or its run ended: no run waits on the edge
        except TimeoutError:
            # No worker runs it now. Written around it, its run would wait on the edge for
            # ever; the unlink it was sent still lands once a worker picks it up.
            raise RuntimeError(
                f"task {dependent.task_id}, which depends on {task_id}, did not answer its "
                "unlink (is a worker running?); deleting again finishes"
            ) from None
    removed = Event.model_validate(
        {
            "type": "task.dependency.updated",
            # One id per edge removed: a retried deletion records it once.
            "eventId": f"{dependent.task_id}:unlinked:{task_id}",
            "timestamp": now_iso(),
            "threadId": dependent.task_id,  # the dependent's own log
            "sessionId": dependent.scope.session_id,
            "status": dependent.status,
            "taskId": dependent.task_id,
            "payload": {"dependsOn": task_id, "change": "removed", "reason": reason},
        }
    )
    try:
        await asyncio.to_thread(store.tasks.link, removed)
    except TaskError:
        pass  # the edge is gone already (removed by its run meanwhile)


__all__ = ["DeletionRefused", "delete_job", "delete_one_job", "delete_one_task", "delete_task"]
