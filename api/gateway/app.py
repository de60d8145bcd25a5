"""The HTTP gateway (`weft serve`): the §7.5 scoped-variable completion flow, behind a token.

`GET /threads/{parent}/variables/{request}` shows what a deferred subagent is missing (never
values); `POST` stores the values sealed, marks the request provided and signals the parent
thread (`variables_provided`), which boots the child at once.
"""

from __future__ import annotations

import asyncio
import hmac
from typing import Any
from urllib.parse import parse_qs

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from sqlalchemy import text
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from weft.api.gateway.models import ErrorBody, Health, ProvideValues, ValuesAccepted
from weft.contract.subagents import SIGNAL_VARIABLES_PROVIDED, VariableRequest, VariablesProvided
from weft.store import Store
from weft.store.variable_requests import AlreadyProvided, InvalidValues, RequestNotFound

VARIABLES_PATH = "/threads/{parent_thread_id}/variables/{request_id}"
# No legitimate body comes near this: values are capped at 64 KiB each.
MAX_BODY_BYTES = 1024 * 1024


class GatewayError(Exception):
    """An error reply: status, message, and the request fields at fault."""

    def __init__(self, status: int, message: str, *, fields: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = ErrorBody(error=message, fields=fields or [])


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {status: {"model": ErrorBody} for status in (401, *statuses)}


# Unauthenticated: load balancers probe it, and it tells nothing about any thread.
HEALTH_PATH = "/healthz"
# The browser page cannot send a header: it gets the token once in its URL and keeps it in
# an HttpOnly, SameSite=Lax cookie (sent with its fetches and EventSource; from another site
# only on a top-level GET, so no other site can POST with it).
TOKEN_COOKIE = "weft_token"
PAGE_PATH = "/inbox"


def create_app(
    store: Store,
    temporal_client: Client,
    token: str,
    *,
    title: str = "weft gateway",
    summary: str = "Complete scoped-variable requests of weft threads (Runtime §7.5)",
) -> FastAPI:
    """The gateway app over `store` and `temporal_client`; every route but `/healthz`
    needs `token`."""
    if not token:
        raise ValueError("the gateway needs a bearer token")
    # Declares the scheme in the OpenAPI document; `_RequireToken` enforces it on every
    # path before anything else runs (a body is not even read without the token).
    bearer = HTTPBearer(auto_error=False, description="the token given to `weft serve`")
    app = FastAPI(
        title=title,
        summary=summary,
        version="1",
        dependencies=[Depends(bearer)],
        # The document is served below, behind the token; the HTML docs would load
        # scripts from a CDN and could not send the token anyway.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        max_body_size=MAX_BODY_BYTES,
    )
    app.add_middleware(_RequireToken, token=token)
    _install_error_handlers(app)

    @app.get("/openapi.json", include_in_schema=False)
    async def openapi() -> dict[str, Any]:
        return app.openapi()

    @app.get(
        HEALTH_PATH,
        response_model=Health,
        responses={503: {"model": Health}},
        openapi_extra={"security": []},
        summary="Whether the store and Temporal answer",
    )
    async def healthz() -> Any:
        store_ok, temporal_ok = await asyncio.gather(
            asyncio.to_thread(_store_answers, store), _temporal_answers(temporal_client)
        )
        health = Health(
            status="ok" if store_ok and temporal_ok else "unavailable",
            store=store_ok,
            temporal=temporal_ok,
        )
        return JSONResponse(health.model_dump(), status_code=200 if health.status == "ok" else 503)

    @app.get(
        VARIABLES_PATH,
        response_model=VariableRequest,
        responses=_errors(404),
        summary="A scoped-variable request: what the deferred subagent is missing (no values)",
    )
    async def read_request(parent_thread_id: str, request_id: str) -> VariableRequest:
        request = await asyncio.to_thread(
            store.variable_requests.get, request_id, parent_thread_id=parent_thread_id
        )
        if request is None:
            raise GatewayError(404, _unknown(parent_thread_id, request_id))
        return request

    @app.post(
        VARIABLES_PATH,
        status_code=202,
        response_model=ValuesAccepted,
        responses=_errors(400, 404, 409, 410, 413, 415, 422, 502, 503),
        summary="Provide the missing values; the parent thread boots the subagent at once",
    )
    async def provide(
        parent_thread_id: str, request_id: str, body: ProvideValues
    ) -> ValuesAccepted:
        try:
            await asyncio.to_thread(
                store.variable_requests.provide,
                request_id,
                body.values,
                parent_thread_id=parent_thread_id,
            )
        except RequestNotFound:
            raise GatewayError(404, _unknown(parent_thread_id, request_id)) from None
        except AlreadyProvided as err:
            raise GatewayError(409, str(err)) from None
        except InvalidValues as err:
            raise GatewayError(422, str(err), fields=err.fields) from None
        await _signal_parent(store, temporal_client, parent_thread_id, request_id)
        return ValuesAccepted(request_id=request_id)

    return app


async def _signal_parent(
    store: Store, client: Client, parent_thread_id: str, request_id: str
) -> None:
    """Tell the parent the values are there: plain JSON, the request id only."""
    payload = VariablesProvided(request_id=request_id).model_dump(mode="json", by_alias=True)
    try:
        await client.get_workflow_handle(parent_thread_id).signal(
            SIGNAL_VARIABLES_PROVIDED, payload
        )
    except RPCError as err:
        # The signal surely did not arrive: forget the values so the client can retry.
        if err.status == RPCStatusCode.NOT_FOUND:
            await asyncio.to_thread(store.variable_requests.withdraw, request_id)
            raise GatewayError(
                410, f"thread {parent_thread_id!r} is not running; the values were not kept"
            ) from None
        if err.status == RPCStatusCode.UNAVAILABLE:
            await asyncio.to_thread(store.variable_requests.withdraw, request_id)
            raise GatewayError(
                503, f"Temporal is unavailable ({err.message}); the values were not kept, retry"
            ) from None
        # Otherwise the signal may have arrived: keep the values the child will need.
        raise GatewayError(
            502,
            f"signalling thread {parent_thread_id!r} failed ({err.message}); the values are "
            "stored and the thread may not have been told",
        ) from None


class _RequireToken:
    """ASGI middleware: 401 unless the token is presented, compared in constant time.

    The token comes as `Authorization: Bearer <token>`, as the page's cookie, or (only for
    `GET /inbox`, which then moves it into the cookie) as `?token=`. `/healthz` is open.
    """

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self._app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorised(scope):
            body = ErrorBody(error="bearer token required")
            reply = JSONResponse(
                body.model_dump(),
                status_code=401,
                headers={"WWW-Authenticate": 'Bearer realm="weft"'},
            )
            await reply(scope, receive, send)
            return
        await self._app(scope, receive, send)

    def _authorised(self, scope: Scope) -> bool:
        path, method = scope.get("path", ""), scope.get("method", "")
        if path == HEALTH_PATH and method in ("GET", "HEAD"):
            return True
        if path == PAGE_PATH and method == "GET":
            # A token in the page's address is the one to judge (and to keep, see
            # inbox_routes), even over an older cookie of a previous token.
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            if "token" in query:
                return self._matches(query["token"][0])
        headers = Headers(scope=scope)
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and presented.strip():
            return self._matches(presented.strip())
        cookie = cookie_parser(headers.get("cookie", "")).get(TOKEN_COOKIE, "")
        return bool(cookie) and self._matches(cookie)

    def _matches(self, presented: str) -> bool:
        return bool(presented) and hmac.compare_digest(
            presented.encode("utf-8", "surrogateescape"), self._token
        )


def _install_error_handlers(app: FastAPI) -> None:
    """Every error is `ErrorBody` JSON: a body sent as another type is 415, broken JSON 400,
    JSON of the wrong shape 422."""

    @app.exception_handler(GatewayError)
    async def gateway_error(_request: Request, err: GatewayError) -> JSONResponse:
        return JSONResponse(err.body.model_dump(), status_code=err.status)

    @app.exception_handler(HTTPException)
    async def http_error(_request: Request, err: HTTPException) -> JSONResponse:
        body = ErrorBody(error=str(err.detail))
        return JSONResponse(body.model_dump(), status_code=err.status_code, headers=err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, err: RequestValidationError) -> JSONResponse:
        errors = err.errors()
        content_type = request.headers.get("content-type", "")
        if request.method == "POST" and "json" not in content_type.lower():
            body = ErrorBody(error="send the body as JSON (Content-Type: application/json)")
            return JSONResponse(body.model_dump(), status_code=415)
        broken = [error for error in errors if error["type"] == "json_invalid"]
        if broken:
            detail = broken[0].get("ctx", {}).get("error", "")
            body = ErrorBody(error=f"body: not valid JSON ({detail})", fields=["body"])
            return JSONResponse(body.model_dump(), status_code=400)
        problems = [(_field(error["loc"]), str(error["msg"])) for error in errors]
        body = ErrorBody(
            error="; ".join(f"{field}: {message}" for field, message in problems),
            fields=[field for field, _ in problems],
        )
        return JSONResponse(body.model_dump(), status_code=422)


def _field(loc: Any) -> str:
    """`("body", "values", "X")` → `values.X`; the bare body is `body`."""
    parts = [str(part) for part in loc]
    return ".".join(parts[1:] if parts[:1] == ["body"] and len(parts) > 1 else parts)


def _unknown(parent_thread_id: str, request_id: str) -> str:
    return f"thread {parent_thread_id!r} has no variable request {request_id!r}"


def _store_answers(store: Store) -> bool:
    try:
        with store.engine.connect() as connection:
            connection.execute(text("SELECT 1"))
    except Exception:
        return False
    return True


async def _temporal_answers(client: Client) -> bool:
    try:
        return await asyncio.wait_for(client.service_client.check_health(), timeout=5)
    except Exception:
        return False


__all__ = [
    "HEALTH_PATH",
    "MAX_BODY_BYTES",
    "PAGE_PATH",
    "TOKEN_COOKIE",
    "VARIABLES_PATH",
    "GatewayError",
    "create_app",
]
