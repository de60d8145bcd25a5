"""`weft serve`: the HTTP and SSE API (threads, control, events, the inbox page, and the
§7.5 scoped-variable requests) on the configured stack; docs/http-api.md."""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import signal
from typing import TYPE_CHECKING, Any

from weft.cli.temporal_client import client_from_config
from weft.workers.config import WeftConfig
from weft.workers.secrets import load_keyring

if TYPE_CHECKING:
    from weft.api.jwt_auth import JwtVerifier
    from weft.api.request_limits import RequestLimits

TOKEN_ENV = "WEFT_GATEWAY_TOKEN"


def register(subparsers: Any) -> None:
    """Add `serve` to the main `weft` CLI's subparsers."""
    parser = subparsers.add_parser(
        "serve", help="serve the HTTP API: threads, control, SSE events and the inbox page"
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8088, help="listen port (default: 8088)")
    parser.add_argument(
        "--token",
        help=f"the admin bearer token (default: ${TOKEN_ENV}, or made and shown); tenants "
        "call with API keys (`weft key create`)",
    )
    parser.add_argument(
        "--cors-origin",
        help="the one browser origin allowed to call the API from another site (default: none)",
    )
    parser.set_defaults(handler=serve)


async def serve(args: argparse.Namespace, config: WeftConfig) -> int:
    """Serve until SIGINT/SIGTERM (a graceful stop, status 0), over the configured store,
    Temporal and codec keys."""
    from weft.activities.correlation import stamp_event
    from weft.api import create_api
    from weft.api.context import ApiContext
    from weft.api.event_feed import open_event_feed
    from weft.api.gateway import GatewayServer
    from weft.client.threads import Threads
    from weft.store import Store
    from weft.workers.telemetry import tracer_provider, tracing_interceptor, weft_tracer

    token = args.token or os.environ.get(TOKEN_ENV)
    page_token = "$" + TOKEN_ENV  # never echo a token the operator chose into logs
    if not token:
        token = page_token = secrets.token_urlsafe(32)
        print(f"weft serve: no {TOKEN_ENV} set; this run's token: {token}", flush=True)
    keyring = load_keyring(config)
    temporal = config.temporal
    tracing = tracer_provider(config.telemetry.tracing)
    client = await client_from_config(
        config, interceptors=[tracing_interceptor(tracing)] if tracing else []
    )
    store = await asyncio.to_thread(Store.open, config.store_url(), keyring=keyring)
    store.database.stamp_event = stamp_event  # events the API writes carry its span
    feed = await open_event_feed(store)
    jwt = jwt_verifier(config)
    try:
        ctx = ApiContext(
            store=store,
            client=client,
            threads=Threads(client, task_queue=temporal.task_queue, store=store),
            feed=feed,
            task_queue=temporal.task_queue,
        )
        app = create_api(
            ctx,
            token,
            cors_origin=args.cors_origin,
            tracer=weft_tracer(tracing) if tracing else None,
            jwt=jwt,
            request_limits=request_limits(config),
        )
        server = GatewayServer(app, host=args.host, port=args.port)
        sealing = f"keys {', '.join(keyring.key_ids)}" if keyring else "NO keys: values unsealed"
        async with server:
            # Handlers first: whoever waits for the banner may stop the process at once.
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, server.stop)
            print(
                f"weft serve: {server.url} (Temporal {temporal.address}, "
                f"namespace {temporal.namespace}; {sealing})",
                flush=True,
            )
            print(f"weft serve: inbox page at {server.url}/inbox?token={page_token}", flush=True)
            if jwt is not None:
                print(
                    f"weft serve: JWTs of {jwt.issuer} for {jwt.audience} "
                    f"(keys {jwt.keys.url}; {', '.join(jwt.algorithms)})",
                    flush=True,
                )
            await server.wait()
    finally:
        if jwt is not None:
            await jwt.aclose()
        await feed.close()
        store.close()
        if tracing is not None:
            await asyncio.to_thread(tracing.shutdown)  # export what is still batched
    return 0


def request_limits(config: WeftConfig) -> RequestLimits | None:
    """`serve.requestLimits` for the API, or None when no limit is configured."""
    settings = config.serve.request_limits
    if settings is None:
        return None
    from weft.api.request_limits import RequestLimits

    return RequestLimits(
        per_key=settings.per_key_per_minute,
        per_tenant=settings.per_tenant_per_minute,
        window_seconds=settings.window_seconds,
    )


def jwt_verifier(config: WeftConfig) -> JwtVerifier | None:
    """The verifier of `serve.jwt`'s tokens, or None when JWTs are not configured."""
    settings = config.serve.jwt
    if settings is None:
        return None
    from weft.api.jwt_auth import JwtVerifier  # the API's imports only where it is served

    return JwtVerifier(
        issuer=settings.issuer,
        audience=settings.audience,
        jwks_url=settings.jwks_url,
        tenant_claim=settings.tenant_claim,
        scopes_claim=settings.scopes_claim,
        scope_prefix=settings.scope_prefix,
        algorithms=tuple(settings.algorithms),
        leeway_seconds=settings.leeway_seconds,
        cache_seconds=settings.cache_seconds,
        min_refresh_seconds=settings.min_refresh_seconds,
    )


__all__ = ["TOKEN_ENV", "jwt_verifier", "register", "request_limits", "serve"]
