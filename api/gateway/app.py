"""The HTTP gateway (`weft serve`): the §7.5 scoped-variable completion flow, behind a token.

`GET /threads/{parent}/variables/{request}` shows what a deferred subagent is missing (never
values); `POST` stores the values sealed, marks the request provided and signals the parent
thread (`variables_provided`), which boots the child at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPBearer
from sqlalchemy import text
from starlette.exceptions import HTTPException
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from weft.api.auth import (
    HEALTH_PATH,
    PAGE_PATH,
    TOKEN_COOKIE,
    Authenticator,
    RequireCredential,
    authorize,
)
from weft.api.gateway.models import ErrorBody, Health, ProvideValues, ValuesAccepted
from weft.api.jwt_auth import JwtVerifier
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
    return {status: {"model": ErrorBody} for status in (401, 403, *statuses)}


# `HEALTH_PATH` is unauthenticated: load balancers probe it, and it tells nothing about any
# thread. The inbox page keeps its credential in `TOKEN_COOKIE`: sent with its fetches and
# EventSource; from another site only on a top-level GET, so no other site can POST with it.


def create_app(
    store: Store,
    temporal_client: Client,
    token: str,
    *,
    title: str = "weft gateway",
    summary: str = "Complete scoped-variable requests of weft threads (Runtime §7.5)",
    jwt: JwtVerifier | None = None,
) -> FastAPI:
    """The gateway app over `store` and `temporal_client`; every route but `/healthz`
    needs `token` (admin over every tenant), an API key with the route's scope, or (with
    `jwt`) an issuer's JWT with it (api/auth.py)."""
    authenticator = Authenticator(store, token, jwt=jwt)
    # Declares the scheme in the OpenAPI document; `RequireCredential` enforces it on every
    # path before anything else runs (a body is not even read without a credential), and
    # `authorize` checks the route's scope and the tenant of the thread it names.
    bearer = HTTPBearer(
        auto_error=False, description="the token given to `weft serve`, or an API key"
    )
    app = FastAPI(
        title=title,
        summary=summary,
        version="1",
        dependencies=[Depends(bearer), Depends(authorize(store, temporal_client))],
        # The document is served below, behind the token; the HTML docs would load
        # scripts from a CDN and could not send the token anyway.
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        max_body_size=MAX_BODY_BYTES,
    )
    app.add_middleware(RequireCredential, authenticator=authenticator)
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
