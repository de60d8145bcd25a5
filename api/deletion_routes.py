"""`DELETE /threads/{thread_id}`: terminate the thread if it runs and delete everything of
it, in Temporal and the store (activities/thread_deletion.py, docs/deletion.md).

A tenant's key deletes only its tenant's threads: `authorize` answers 404 for another's
before this route runs. A thread nothing is left of is a 404 too, so a retried deletion
that finished says so; one a crash left half-done is finished.

`deleted` is every deletion route's reply (threads here, tasks and jobs in their routes):
the report, or its error's status from the route's table (`*_DELETION_ERRORS`)."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations.

from collections.abc import Awaitable, Sequence
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from temporalio.service import RPCError

from weft.activities.task_deletion import DeletionRefused
from weft.activities.thread_deletion import DeletionReport, ThreadNotFound, delete_thread
from weft.api.context import ApiContext
from weft.api.gateway.app import GatewayError
from weft.api.models import error_responses
from weft.api.thread_routes import ThreadId
from weft.contract.jobs import JobError, JobNotFound
from weft.contract.tasks import TaskError, TaskNotFound


class DeletedThread(BaseModel):
    """One deleted thread: what went of it."""

    model_config = ConfigDict(populate_by_name=True)

    thread_id: str = Field(alias="threadId")
    rows: dict[str, int] = Field(description="store rows deleted, by table")
    idempotency_keys: int = Field(alias="idempotencyKeys")
    blobs: int = Field(description="blobs deleted: those no surviving file refers to")
    executions: int = Field(description="Temporal executions (runs) deleted")


class DeletedTask(BaseModel):
    """One deleted task: what went of it."""

    model_config = ConfigDict(populate_by_name=True)

    task_id: str = Field(alias="taskId")
    rows: dict[str, int] = Field(description="store rows deleted, by table (its row, its log)")
    idempotency_keys: int = Field(alias="idempotencyKeys")
    executions: int = Field(description="Temporal executions (TaskRun runs) deleted")
    unlinked: list[str] = Field(
        default_factory=list,
        description="the tasks that depended on it: their edge to it removed and recorded",
    )


class DeletedJob(BaseModel):
    """One deleted job: what went of it (its items' tasks are listed under `tasks`)."""

    model_config = ConfigDict(populate_by_name=True)

    job_id: str = Field(alias="jobId")
    rows: dict[str, int] = Field(description="store rows deleted, by table (row, items, log)")
    idempotency_keys: int = Field(alias="idempotencyKeys")
    executions: int = Field(description="Temporal executions (JobRun runs) deleted")


class Deleted(BaseModel):
    """Every thread deleted, children before their parent; the jobs and tasks deleted, and
    those that were cancelled first."""

    deleted: list[DeletedThread]
    tasks: list[DeletedTask] = Field(default_factory=list)
    jobs: list[DeletedJob] = Field(default_factory=list)
    cancelled: list[str] = Field(default_factory=list, description="jobs and tasks stopped first")


def router(ctx: ApiContext) -> APIRouter:
    """The deletion route over `ctx`."""
    routes = APIRouter(tags=["threads"])

    @routes.delete(
        "/threads/{thread_id}",
        response_model=Deleted,
        response_model_by_alias=True,
        responses=error_responses(404, 422, 503),
        summary="Delete a thread: terminate it, then delete its rows, blobs and executions",
    )
    async def delete(
        thread_id: ThreadId,
        children: Annotated[bool, Query(description="its subagents too, recursively")] = False,
    ) -> Deleted:
        return await deleted(
            delete_thread(ctx.client, ctx.store, thread_id, children=children),
            THREAD_DELETION_ERRORS,
            field="thread_id",
        )

    return routes


# A deletion's errors and their statuses, the first that matches deciding; a refusal
# (409) or bad input (422) names the request field at fault.
DeletionErrors = Sequence[tuple[type[Exception], int]]
THREAD_DELETION_ERRORS: DeletionErrors = ((ThreadNotFound, 404), (ValueError, 422))
# A task others depend on, or a job's item's task, is refused for what it is (409).
TASK_DELETION_ERRORS: DeletionErrors = (
    (TaskNotFound, 404),
    (DeletionRefused, 409),
    (TaskError, 422),
)
JOB_DELETION_ERRORS: DeletionErrors = ((JobNotFound, 404), (JobError, 422))


async def deleted(
    deletion: Awaitable[DeletionReport], errors: DeletionErrors, *, field: str
) -> Deleted:
    """A deletion's reply (the thread, task and job routes): what went, or the status of
    its error in `errors`, its field the error's own `field` or else `field`. Temporal
    slow to close or forget it (a `RuntimeError`), or not answering, is 503: deleting
    again finishes."""
    try:
        report = await deletion
    except RPCError as err:
        raise GatewayError(503, f"Temporal did not answer ({err.message}); retry") from None
    except Exception as err:
        status = next((status for kind, status in errors if isinstance(err, kind)), None)
        if status is None and isinstance(err, RuntimeError):
            status = 503
        if status is None:
            raise
        at_fault = [getattr(err, "field", None) or field] if status in (409, 422) else []
        raise GatewayError(status, str(err), fields=at_fault) from None
    return Deleted.model_validate(report.wire())


__all__ = [
    "JOB_DELETION_ERRORS",
    "TASK_DELETION_ERRORS",
    "THREAD_DELETION_ERRORS",
    "Deleted",
    "DeletedJob",
    "DeletedTask",
    "DeletedThread",
    "DeletionErrors",
    "deleted",
    "router",
]
