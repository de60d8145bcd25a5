"""`DELETE /threads/{thread_id}`: terminate the thread if it runs and delete everything of
it, in Temporal and the store (activities/thread_deletion.py, docs/deletion.md).

A tenant's key deletes only its tenant's threads: `authorize` answers 404 for another's
before this route runs. A thread nothing is left of is a 404 too, so a retried deletion
that finished says so; one a crash left half-done is finished."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations.

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from temporalio.service import RPCError

from weft.activities.thread_deletion import ThreadNotFound, delete_thread
from weft.api.context import ApiContext
from weft.api.gateway.app import GatewayError
from weft.api.models import error_responses
from weft.api.thread_routes import ThreadId


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
        try:
            report = await delete_thread(ctx.client, ctx.store, thread_id, children=children)
        except ThreadNotFound as err:
            raise GatewayError(404, str(err)) from None
        except ValueError as err:
            raise GatewayError(422, str(err), fields=["thread_id"]) from None
        except RuntimeError as err:  # Temporal is slow to close or forget it: retry
            raise GatewayError(503, str(err)) from None
        except RPCError as err:
            raise GatewayError(503, f"Temporal did not answer ({err.message}); retry") from None
        return Deleted.model_validate(report.wire())

    return routes


__all__ = ["Deleted", "DeletedJob", "DeletedTask", "DeletedThread", "router"]
