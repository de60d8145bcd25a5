"""`GET /threads/{id}/effects`: a thread's pending scheduled effects, as `weft thread
effects` lists them (docs/effects.md). Scheduling and removing stay with the operator
(the CLI, Python and a thread's own tools)."""

# No `from __future__ import annotations`: FastAPI reads the routes' parameter annotations.

from fastapi import APIRouter
from pydantic import Field

from weft.api.context import ApiContext
from weft.api.models import error_responses
from weft.api.thread_routes import ThreadId, not_readable
from weft.client.resume import thread_read
from weft.contract.effects import ScheduledEffect
from weft.contract.wire import CamelModel


class PendingEffect(ScheduledEffect):
    """One pending effect of the thread."""

    due: bool = Field(
        default=False,
        description="its timer fired and it waits for the running step to end (a thread "
        "that cannot answer, closed or without a worker, shows none as due)",
    )


class ThreadEffects(CamelModel):
    """`GET /threads/{id}/effects`: the thread's pending effects, soonest first."""

    thread_id: str
    effects: list[PendingEffect]


def router(ctx: ApiContext) -> APIRouter:
    """The effect route over `ctx`."""
    routes = APIRouter(tags=["threads"])

    @routes.get(
        "/threads/{thread_id}/effects",
        response_model=ThreadEffects,
        responses=error_responses(404, 422, 503),
        summary="The thread's pending scheduled effects, soonest first: live, or as it "
        "last stored them",
    )
    async def list_effects(thread_id: ThreadId) -> ThreadEffects:
        # The read model lists them (with `due`) as the CLI prints them; a closed thread's
        # comes from the store, rebuilt from its events.
        read = await thread_read(ctx.client, ctx.store, thread_id)
        if read is None:
            raise await not_readable(ctx, thread_id)
        effects = [PendingEffect.model_validate(e) for e in read.scheduled_effects]
        return ThreadEffects(thread_id=thread_id, effects=effects)

    return routes


__all__ = ["PendingEffect", "ThreadEffects", "router"]
