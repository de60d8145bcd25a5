"""`create_api`: the gateway app (token, errors, `/healthz`, §7.5 variables) with the thread
API, the event stream and the inbox page added, and one CORS origin if configured."""

from __future__ import annotations

from fastapi import FastAPI
from opentelemetry.trace import Tracer
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware

from weft.api import (
    bundle_routes,
    control_routes,
    deletion_routes,
    deployment_routes,
    effect_routes,
    event_routes,
    fork_routes,
    inbox_routes,
    inventory_routes,
    job_routes,
    subagent_routes,
    task_routes,
    thread_routes,
)
from weft.api.context import ApiContext
from weft.api.gateway.app import create_app
from weft.api.jwt_auth import JwtVerifier
from weft.api.request_limits import LimitRequests, RequestLimiter, RequestLimits
from weft.api.tracing import RequestSpans


def create_api(
    ctx: ApiContext,
    token: str,
    *,
    cors_origin: str | None = None,
    tracer: Tracer | None = None,
    jwt: JwtVerifier | None = None,
    request_limits: RequestLimits | None = None,
) -> FastAPI:
    """The whole `weft serve` app over `ctx`; every route but `/healthz` needs `token`, an
    API key or (with `jwt`) an issuer's JWT. With a `tracer`, each request is a server
    span continuing its `traceparent`. With `request_limits`, a key's or tenant's requests
    over them are refused with 429 (api/request_limits.py)."""
    app = create_app(
        ctx.store,
        ctx.client,
        token,
        title="weft",
        summary="Start, steer and follow weft threads over HTTP and Server-Sent Events",
        jwt=jwt,
    )
    routers = (
        thread_routes,
        inventory_routes,
        subagent_routes,
        control_routes,
        deletion_routes,
        event_routes,
        effect_routes,
        inbox_routes,
        bundle_routes,
        fork_routes,
        deployment_routes,
        task_routes,
        job_routes,
    )
    for routes in routers:
        app.include_router(routes.router(ctx))
    if request_limits is not None and request_limits.any:
        # Innermost (appended, where `add_middleware` prepends): it counts the principal
        # `RequireCredential` found, and a refusal is audited like any other reply.
        limiter = RequestLimiter(ctx.store, request_limits)
        app.user_middleware.append(Middleware(LimitRequests, limiter=limiter))
    if cors_origin:
        # Added last, so it runs first: a preflight is answered before the token is asked for.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=[cors_origin],
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
            expose_headers=["Idempotent-Replayed"],
            max_age=600,
        )
    if tracer is not None:
        # Outermost: the span covers CORS and token checks, and refusals are traced too.
        app.add_middleware(RequestSpans, tracer=tracer)
    return app


__all__ = ["create_api"]
