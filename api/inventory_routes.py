"""`GET /threads/{id}/tools` and `GET /threads/{id}/environment`: a thread's tool inventory
and execution environment, live or as it stored them when it closed (docs/read-models.md).
"""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

from fastapi import APIRouter

from weft.api.context import ApiContext
from weft.api.models import error_responses

# The thread routes' id parameter and their rule for a thread with nothing to show.
from weft.api.thread_routes import ThreadId, not_readable
from weft.client.inventory import execution_environment, tool_inventory
from weft.contract.inventory import ExecutionEnvironment, ToolInventory


def router(ctx: ApiContext) -> APIRouter:
    """The two read-model routes over `ctx`; a thread with nothing to show is answered as
    `GET /threads/{id}` answers it (404 unknown or closed without one, 503 running with no
    worker answering)."""
    routes = APIRouter(tags=["threads"])

    @routes.get(
        "/threads/{thread_id}/tools",
        response_model=ToolInventory,
        responses=error_responses(404, 422, 503),
        summary="The tool inventory: every tool the thread's active side can call, with its "
        "permission and source (live, or as stored when the thread closed)",
    )
    async def read_tools(thread_id: ThreadId) -> ToolInventory:
        found = await tool_inventory(ctx.client, ctx.store, thread_id)
        if found is None:
            raise await not_readable(ctx, thread_id)
        return found

    @routes.get(
        "/threads/{thread_id}/environment",
        response_model=ExecutionEnvironment,
        responses=error_responses(404, 422, 503),
        summary="The execution environment: env names (never values), filesystem, limits and "
        "running code (live, or as stored when the thread closed)",
    )
    async def read_environment(thread_id: ThreadId) -> ExecutionEnvironment:
        found = await execution_environment(ctx.client, ctx.store, thread_id)
        if found is None:
            raise await not_readable(ctx, thread_id)
        return found

    return routes
