"""Forks and rewinds over HTTP: `POST /threads/{id}/fork` and `POST /threads/{id}/rewind`
(docs/time-travel.md). Both are idempotent with an `Idempotency-Key`: the key also names the
fork (a retry never starts a second one)."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations of the
# routes, and those name dependencies built inside `router` (a closure, not a global).

from typing import Annotated

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from pydantic import Field
from temporalio.client import WorkflowExecutionStatus

from weft.api.context import ApiContext, thread_status
from weft.api.gateway.app import GatewayError
from weft.api.idempotency import IdempotentRequest, Reply, idempotency
from weft.api.models import POST_ERRORS, error_responses
from weft.api.thread_routes import ThreadId
from weft.client.forks import ForkRefused, Forks
from weft.contract.forks import ForkResult
from weft.contract.wire import CamelModel
from weft.definitions import DefinitionError

_NAME = Field(default=None, min_length=1, max_length=255)


class ForkInput(CamelModel):
    """`POST /threads/{id}/fork` body: the point, and what the fork changes."""

    at: str | int = Field(description="a turn id (after it ended) or an event sequence")
    agent: str | None = _NAME
    model: str | None = _NAME
    prompt: str | None = _NAME
    definitions: dict[str, str] | None = Field(
        default=None,
        max_length=1000,
        description="a definitions set to run the fork on: YAML (or JSON) documents by their "
        "path in a definitions folder, `models/`, `prompts/` or `agents/NAME.yaml`; checked "
        "as the worker checks its folder (422 names the file and field); prompts may name "
        "the source's function tools",
    )


class RewindInput(CamelModel):
    """`POST /threads/{id}/rewind` body."""

    at: str = Field(min_length=1, max_length=255, description="the turn id to go back to")
    reason: str | None = Field(default=None, max_length=4096)


def router(ctx: ApiContext) -> APIRouter:
    """The fork routes over `ctx`."""
    routes = APIRouter(tags=["time travel"])
    Idempotent = Annotated[IdempotentRequest, Depends(idempotency(ctx.store))]
    forks = Forks(ctx.client, ctx.store, task_queue=ctx.task_queue)

    @routes.post(
        "/threads/{thread_id}/fork",
        status_code=201,
        response_model=ForkResult,
        responses=error_responses(*POST_ERRORS, 404, 503),
        summary="Start a thread from this one's state after a turn or event; 409 inside a turn",
    )
    async def fork(thread_id: ThreadId, body: ForkInput, request: Idempotent) -> Response:
        async def act() -> Reply:
            await thread_status(ctx, thread_id)  # 404 for an unknown thread
            try:
                result = await forks.fork(
                    thread_id,
                    at=body.at,
                    agent=body.agent,
                    model=body.model,
                    prompt=body.prompt,
                    definitions=body.definitions,
                    fork_id=request.derived_id("fork"),
                )
            except DefinitionError as err:
                raise GatewayError(422, f"definitions: {err}") from None
            except (ForkRefused, ValueError) as err:
                raise GatewayError(409, str(err)) from None
            return Reply(201, result)

        return await request.run(act)

    @routes.post(
        "/threads/{thread_id}/rewind",
        response_model=ForkResult,
        responses=error_responses(*POST_ERRORS, 404, 503),
        summary="Fork after a turn and close this thread in the fork's favour",
    )
    async def rewind(thread_id: ThreadId, body: RewindInput, request: Idempotent) -> Response:
        async def act() -> Reply:
            if await thread_status(ctx, thread_id) != WorkflowExecutionStatus.RUNNING:
                raise GatewayError(409, f"thread {thread_id!r} has closed; fork it instead")
            try:
                result = await forks.rewind(
                    thread_id, at=body.at, reason=body.reason, fork_id=request.derived_id("fork")
                )
            except (ForkRefused, ValueError) as err:
                raise GatewayError(409, str(err)) from None
            return Reply(200, result)

        return await request.run(act)

    return routes
