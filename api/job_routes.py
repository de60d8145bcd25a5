"""The job routes: create a job from items, read it, cancel and resume it, and its results
as JSON Lines; the same checks and refusals as `weft.Jobs` (docs/jobs.md)."""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Path, Query, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import Field
from temporalio.service import RPCError

from weft.api.auth import principal
from weft.api.context import ApiContext
from weft.api.deletion_routes import JOB_DELETION_ERRORS, Deleted, deleted
from weft.api.gateway.app import GatewayError
from weft.api.idempotency import IdempotentRequest, Reply, idempotency
from weft.api.models import POST_ERRORS, error_responses
from weft.api.thread_routes import ID_PATH_PATTERN
from weft.client.jobs import JobError, JobNotFound, Jobs, parse_item, parse_rate
from weft.contract.jobs import JobRate, JobRecord, JobSpec, JobStatus, JobThreadNotFound
from weft.contract.wire import CamelModel

JobId = Annotated[str, Path(pattern=ID_PATH_PATTERN, description="the job id")]


class CreateJob(JobSpec):
    """`POST /jobs`: the job's options and its items (each a string, or an object with
    `input`, `key`, `metadata`)."""

    items: list[str | dict[str, Any]] = Field(min_length=1, max_length=100_000)
    rate: JobRate | str | None = Field(  # type: ignore[assignment]
        default=None, description="KEY=LIMITS (e.g. openai=500rpm,200000tpm) or an object"
    )
    job_id: str | None = Field(default=None, description="job-<12 hex digits>; new when left out")


class JobCommand(CamelModel):
    """`cancel` and `resume`: why, for the job's log."""

    reason: str | None = Field(default=None, max_length=4096)


def router(ctx: ApiContext) -> APIRouter:
    """The job routes over `ctx`; jobs start on `ctx.task_queue`."""
    routes = APIRouter(tags=["jobs"])
    jobs = Jobs(ctx.client, ctx.store, task_queue=ctx.task_queue)
    Idempotent = Annotated[IdempotentRequest, Depends(idempotency(ctx.store))]

    @routes.post(
        "/jobs",
        status_code=201,
        response_model=JobRecord,
        responses=error_responses(*POST_ERRORS, 503),
        summary="Create a job of items and start it (a bad item is refused, naming it)",
    )
    async def create_job(body: CreateJob, request: Idempotent, http: Request) -> Response:
        # A tenant's key creates its tenant's jobs; an admin's is the body's `tenant`'s.
        tenant = principal(http).confined_to
        return await request.run(lambda: _create(ctx, jobs, body, request, tenant))

    @routes.get(
        "/jobs",
        response_model=list[JobRecord],
        responses=error_responses(422),
        summary="`list_jobs`: jobs, most recently changed first",
    )
    async def list_jobs(
        http: Request,
        status: Annotated[
            list[JobStatus] | None, Query(description="only jobs in these statuses")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
    ) -> list[JobRecord]:
        tenant = principal(http).confined_to  # a tenant's key lists its own only
        # Open jobs are described: a run closed through Temporal has its end recorded.
        return await jobs.list_checked(statuses=status, tenant=tenant, limit=limit)

    @routes.get(
        "/jobs/{job_id}",
        response_model=JobRecord,
        responses=error_responses(404, 422),
        summary="A job: its options, status and item counts",
    )
    async def read_job(job_id: JobId) -> JobRecord:
        try:
            return await jobs.show(job_id)  # an open job's run closed through Temporal: recorded
        except JobNotFound as err:
            raise GatewayError(404, str(err)) from None

    @routes.delete(
        "/jobs/{job_id}",
        response_model=Deleted,
        response_model_by_alias=True,
        responses=error_responses(404, 422, 503),
        summary="Delete a job: cancel it if open, then each item's task, its items, log "
        "and runs (`withThreads`: the items' attempts' threads too)",
    )
    async def delete_job(
        job_id: JobId,
        with_threads: Annotated[
            bool,
            Query(alias="withThreads", description="the threads its items' attempts ran too"),
        ] = False,
    ) -> Deleted:
        return await deleted(
            jobs.delete(job_id, with_threads=with_threads, audit_as=None),
            JOB_DELETION_ERRORS,
            field="jobId",
        )

    @routes.post(
        "/jobs/{job_id}/cancel",
        status_code=202,
        response_model=JobRecord,
        responses=error_responses(*POST_ERRORS, 404, 503),
        summary="Stop a job: no new items start, running ones are cancelled (409 once ended)",
    )
    async def cancel_job(
        job_id: JobId, request: Idempotent, body: Annotated[JobCommand | None, Body()] = None
    ) -> Response:
        async def act() -> Reply:
            await _refusing(jobs.cancel(job_id, (body or JobCommand()).reason))
            return Reply(202, await _get(jobs, job_id))

        return await request.run(act)

    @routes.post(
        "/jobs/{job_id}/resume",
        status_code=202,
        response_model=JobRecord,
        responses=error_responses(*POST_ERRORS, 404, 503),
        summary="Run a cancelled or failed job's unfinished items (409 for any other job)",
    )
    async def resume_job(
        job_id: JobId, request: Idempotent, body: Annotated[JobCommand | None, Body()] = None
    ) -> Response:
        async def act() -> Reply:
            await _refusing(jobs.resume(job_id, (body or JobCommand()).reason))
            return Reply(202, await _get(jobs, job_id))

        return await request.run(act)

    @routes.get(
        "/jobs/{job_id}/results",
        responses={
            200: {
                "description": "one JSON object a line per item: status, output or error",
                "content": {"application/x-ndjson": {"schema": {"type": "string"}}},
            },
            **error_responses(404, 422),
        },
        summary="A job's results as JSON Lines, in item order",
    )
    async def job_results(job_id: JobId) -> Response:
        await _get(jobs, job_id)
        return StreamingResponse(_lines(jobs, job_id), media_type="application/x-ndjson")

    return routes


async def _create(
    ctx: ApiContext, jobs: Jobs, body: CreateJob, request: IdempotentRequest, tenant: str | None
) -> Reply:
    if tenant is not None and body.tenant not in (None, tenant):
        raise GatewayError(
            422,
            f"tenant {body.tenant!r}: this key creates jobs of tenant {tenant!r}",
            fields=["tenant"],
        )
    # The key names the job, so a retry after a crash between storing it and recording
    # the reply finds the job it made instead of making a second one.
    job_id = body.job_id
    if job_id is None and (derived := request.derived_id("job")) is not None:
        job_id = derived[: len("job-") + 12]
        made = await asyncio.to_thread(ctx.store.jobs.get, job_id)
        if made is not None:
            return Reply(201, made)
    try:
        items = [parse_item(item, f"items[{n}]") for n, item in enumerate(body.items)]
        rate = parse_rate(body.rate) if isinstance(body.rate, str) else body.rate
        fields = body.model_dump(
            mode="json",
            exclude={"items", "rate", "job_id", "assignee", "concurrency", "acceptance"},
        )
        if tenant is not None:
            fields["tenant"] = tenant
        record = await jobs.create(
            body.assignee,
            items,
            concurrency=body.concurrency,
            job_id=job_id,
            rate=rate,
            acceptance_schema=body.acceptance.schema_,
            **fields,
        )
    except JobThreadNotFound as err:
        # Worded as the 404 of an unknown thread's route, so a tenant learns nothing.
        raise GatewayError(404, f"no thread {err.thread_id!r}", fields=["threadId"]) from None
    except JobError as err:
        if err.__cause__ is not None:  # a failed start carries its cause
            raise GatewayError(503, str(err)) from None
        raise GatewayError(422, str(err), fields=[_field_of(str(err))]) from None
    return Reply(201, record)


def _field_of(message: str) -> str:
    """The body field a `JobError` from `create` is about (its messages name it first)."""
    for prefix, field in (
        ("items", "items"),
        ("rate", "rate"),
        ("acceptance.schema", "acceptance.schema"),
        ("jobId", "jobId"),
        ("job job-", "jobId"),
    ):
        if message.startswith(prefix):
            return field
    return "body"


async def _lines(jobs: Jobs, job_id: str) -> AsyncIterator[bytes]:
    results = jobs.results(job_id)
    while True:
        page = await asyncio.to_thread(_next_page, results)
        if not page:
            return
        yield "".join(line + "\n" for line in page).encode()


def _next_page(results: Any, size: int = 500) -> list[str]:
    page: list[str] = []
    for line in results:
        page.append(line)
        if len(page) == size:
            break
    return page


async def _get(jobs: Jobs, job_id: str) -> JobRecord:
    try:
        return await asyncio.to_thread(jobs.get, job_id)
    except JobNotFound as err:
        raise GatewayError(404, str(err)) from None


async def _refusing(command: Awaitable[object]) -> None:
    """Run a cancel or resume: an unknown job is 404, a state that forbids it 409."""
    try:
        await command
    except JobNotFound as err:
        raise GatewayError(404, str(err)) from None
    except JobError as err:
        raise GatewayError(409, str(err)) from None
    except RPCError as err:
        raise GatewayError(503, f"Temporal did not answer ({err.message}); retry") from None


__all__ = ["CreateJob", "JobCommand", "router"]
