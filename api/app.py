"""`create_api`: the gateway app (token, errors, `/healthz`, §7.5 variables) with the thread
API, the event stream and the inbox page added, and one CORS origin if configured."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from weft.api import control_routes, event_routes, inbox_routes, thread_routes
from weft.api.context import ApiContext
from weft.workers.gateway.app import create_app


def create_api(ctx: ApiContext, token: str, *, cors_origin: str | None = None) -> FastAPI:
    """The whole `weft serve` app over `ctx`; every route but `/healthz` needs `token`."""
    app = create_app(
        ctx.store,
        ctx.client,
        token,
        title="weft",
        summary="Start, steer and follow weft threads over HTTP and Server-Sent Events",
    )
    for routes in (thread_routes, control_routes, event_routes, inbox_routes):
        app.include_router(routes.router(ctx))
    if cors_origin:
        # Added last, so it runs first: a preflight is answered before the token is asked for.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=[cors_origin],
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
            expose_headers=["Idempotent-Replayed"],
            max_age=600,
        )
    return app


__all__ = ["create_api"]
