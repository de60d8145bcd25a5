"""`GET /threads/{id}/subagents`: a thread's `subagent_job_summary` (its child graph, the
tasks its threads created with their attempt threads, and each child's recoverability),
read from the store (docs/read-models.md)."""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

from fastapi import APIRouter

from weft.api.context import ApiContext
from weft.api.gateway.app import GatewayError
from weft.api.models import error_responses
from weft.api.thread_routes import ThreadId
from weft.client.subagent_summary import subagent_summary
from weft.contract.subagent_summary import SubagentJobSummary


def router(ctx: ApiContext) -> APIRouter:
    """The summary route over `ctx`; a thread the store does not know is a 404."""
    routes = APIRouter(tags=["threads"])

    @routes.get(
        "/threads/{thread_id}/subagents",
        response_model=SubagentJobSummary,
        responses=error_responses(404, 422),
        summary="The subagent and job summary: the child graph, the tasks the thread and its "
        "children created with their attempt threads, and whether each child can still "
        "make progress",
    )
    async def read_subagents(thread_id: ThreadId) -> SubagentJobSummary:
        found = await subagent_summary(ctx.client, ctx.store, thread_id)
        if found is None:
            raise GatewayError(404, f"thread {thread_id!r} is not known to the store")
        return found

    return routes
