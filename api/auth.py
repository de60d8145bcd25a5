"""Who calls, and what they may do: the credential of every request (docs/tenants.md).

A request's bearer is either the server's own token, which acts as admin over every
tenant, an API key (`store/api_keys.py`), which acts for its tenant with its scopes, or,
when `serve.jwt` is configured, an issuer's JWT, which acts for the tenant and with the
scopes its claims name (`jwt_auth.py`).
`RequireCredential` (ASGI middleware) turns the credential into a `Principal` before
anything else runs, or answers 401. `authorize` (an app-wide dependency) then checks the
matched route's scope (403 naming it) and, for a tenant's key, that a thread, task or job
named in the path is its tenant's: any other answers 404 exactly as an unknown one does,
so a key never learns whether another tenant's thread, task or job exists. Every authenticated POST (a
control action) and DELETE is recorded in the store's audit log with who sent it and its
status.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final
from urllib.parse import parse_qs

from fastapi import Request
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import cookie_parser
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError

from weft.api.jwt_auth import JwtRefused, JwtVerifier, jwt_header
from weft.client.thread_tenant import tenant_clause
from weft.client.thread_tenant import thread_tenant as tenant_of_thread
from weft.contract.tenants import Scope as KeyScope
from weft.store import Store
from weft.store.api_keys import ApiKey, KeyRefused
from weft.store.audit import AuditEntry

log = logging.getLogger(__name__)

# The keys of workflows/search_attributes.py, by name (api/ does not import workflows/).
TENANT_ATTRIBUTE = SearchAttributeKey.for_keyword("WeftTenant")

HEALTH_PATH = "/healthz"
PAGE_PATH = "/inbox"
# The browser page cannot send a header: it gets its credential once in its URL and keeps
# it in an HttpOnly, SameSite=Lax cookie (inbox_routes.py).
TOKEN_COOKIE = "weft_token"
TOKEN_SUBJECT = "token"  # the server's own token, in audit records

# What each route needs, by method and path template. A route missing here needs `admin`:
# a route that is no tenant's (deployments: the cluster's workers) stays with the operator
# rather than letting one tenant act on every tenant's work.
ANY: Final = "any"  # any valid credential
OPEN: Final = "open"  # no credential at all
RouteScope = KeyScope | str
ROUTE_SCOPES: dict[tuple[str, str], RouteScope] = {
    ("GET", HEALTH_PATH): OPEN,
    ("GET", "/openapi.json"): ANY,
    ("GET", PAGE_PATH): ANY,
    ("GET", PAGE_PATH + "/icon.svg"): ANY,
    ("GET", PAGE_PATH + "/{name}"): ANY,
    ("POST", "/threads"): "threads:write",
    ("GET", "/threads"): "threads:read",
    ("GET", "/threads/{thread_id}"): "threads:read",
    ("GET", "/threads/{thread_id}/session"): "threads:read",
    ("GET", "/threads/{thread_id}/messages/{message_id}"): "threads:read",
    ("GET", "/threads/{thread_id}/files/{path:path}"): "threads:read",
    ("GET", "/threads/{thread_id}/tools"): "threads:read",
    ("GET", "/threads/{thread_id}/environment"): "threads:read",
    ("GET", "/threads/{thread_id}/subagents"): "threads:read",
    ("GET", "/threads/{thread_id}/events"): "threads:read",
    ("POST", "/threads/{thread_id}/messages"): "threads:write",
    ("POST", "/threads/{thread_id}/turns"): "threads:write",
    ("POST", "/threads/{thread_id}/budget"): "threads:write",
    ("POST", "/threads/{thread_id}/queue/{queue_id}/remove"): "threads:write",
    ("POST", "/threads/{thread_id}/queue/{queue_id}/promote"): "threads:write",
    ("POST", "/threads/{thread_id}/tools/refresh"): "threads:write",
    ("POST", "/threads/{thread_id}/interrupt"): "threads:write",
    ("POST", "/threads/{thread_id}/upgrade"): "threads:write",
    ("POST", "/threads/{thread_id}/terminate"): "threads:write",
    ("DELETE", "/threads/{thread_id}"): "threads:write",
    ("POST", "/threads/{thread_id}/actions/{action_id}"): "actions:respond",
    ("GET", "/threads/{parent_thread_id}/variables/{request_id}"): "threads:read",
    ("POST", "/threads/{parent_thread_id}/variables/{request_id}"): "threads:write",
    ("GET", "/threads/{thread_id}/effects"): "threads:read",
    # A fork (or rewind) is its source's tenant's; an import is the key's tenant's, under
    # an id `thread_routes.check_chosen_id` allows.
    ("POST", "/threads/{thread_id}/fork"): "threads:write",
    ("POST", "/threads/{thread_id}/rewind"): "threads:write",
    ("GET", "/threads/{thread_id}/export"): "threads:read",
    ("POST", "/threads/import"): "threads:write",
    # Tasks and jobs: a job's items are tasks, so one pair of scopes covers both.
    ("POST", "/tasks"): "tasks:write",
    ("GET", "/tasks"): "tasks:read",
    ("GET", "/tasks/{task_id}"): "tasks:read",
    ("GET", "/tasks/{task_id}/events"): "tasks:read",
    ("POST", "/tasks/{task_id}/cancel"): "tasks:write",
    ("DELETE", "/tasks/{task_id}"): "tasks:write",
    ("POST", "/tasks/{task_id}/retry"): "tasks:write",
    ("POST", "/tasks/{task_id}/start"): "tasks:write",
    ("POST", "/tasks/{task_id}/update"): "tasks:write",
    ("POST", "/tasks/{task_id}/delegate"): "tasks:write",
    ("POST", "/tasks/{task_id}/link"): "tasks:write",
    ("POST", "/tasks/{task_id}/unlink"): "tasks:write",
    ("POST", "/tasks/{task_id}/pause"): "tasks:write",
    ("POST", "/tasks/{task_id}/resume"): "tasks:write",
    ("POST", "/tasks/{task_id}/complete"): "tasks:write",
    ("POST", "/tasks/{task_id}/fail"): "tasks:write",
    ("POST", "/tasks/{task_id}/progress"): "tasks:write",
    ("POST", "/jobs"): "tasks:write",
    ("GET", "/jobs"): "tasks:read",
    ("GET", "/jobs/{job_id}"): "tasks:read",
    ("GET", "/jobs/{job_id}/results"): "tasks:read",
    ("POST", "/jobs/{job_id}/cancel"): "tasks:write",
    ("DELETE", "/jobs/{job_id}"): "tasks:write",
    ("POST", "/jobs/{job_id}/resume"): "tasks:write",
}
# The control actions the audit log records: every authenticated POST, and deletions.
AUDITED_METHODS = ("POST", "DELETE")
# Path parameters that name a thread: a tenant's key reaches only its tenant's.
THREAD_PARAMS = ("thread_id", "parent_thread_id")


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: `subject` (a key id, `token`, or a JWT's `jwt:<sub>`), the
    tenant it is confined to (None: every tenant), its scopes, and the kind of credential
    (`credential`, for messages)."""

    subject: str
    tenant: str | None
    scopes: frozenset[str]
    credential: str = "key"

    @property
    def admin(self) -> bool:
        return "admin" in self.scopes

    def may(self, scope: str) -> bool:
        return self.admin or scope in self.scopes

    @property
    def confined_to(self) -> str | None:
        """The one tenant this principal sees, or None for an admin."""
        return None if self.admin else self.tenant


ADMIN_TOKEN = Principal(subject=TOKEN_SUBJECT, tenant=None, scopes=frozenset({"admin"}))


@dataclass(frozen=True)
class Refused:
    """Why a request has no principal: the reply's message and status (401, or 503 when
    a JWT's keys cannot be fetched)."""

    message: str
    status: int = 401


class Authenticator:
    """Resolves a presented credential: the server's token, else a JWT (by its shape),
    else an API key in the store."""

    def __init__(self, store: Store, token: str, *, jwt: JwtVerifier | None = None) -> None:
        if not token:
            raise ValueError("the gateway needs a bearer token")
        self.store = store
        self._token = token.encode()
        self._jwt = jwt

    def token_matches(self, presented: str) -> bool:
        return bool(presented) and hmac.compare_digest(
            presented.encode("utf-8", "surrogateescape"), self._token
        )

    async def resolve(self, presented: str) -> Principal | Refused:
        if self.token_matches(presented):
            return ADMIN_TOKEN
        header = jwt_header(presented)
        if header is not None:
            return await self._jwt_principal(presented, header)
        found = await asyncio.to_thread(self.store.api_keys.authenticate, presented)
        if isinstance(found, KeyRefused):
            if found.reason == "unknown":
                return Refused("bearer token required")
            return Refused(f"API key {found.key_id} is {found.reason}")
        return _principal(found)

    async def _jwt_principal(self, presented: str, header: dict[str, Any]) -> Principal | Refused:
        if self._jwt is None:
            return Refused("JWT bearer tokens are not accepted here (serve.jwt is not configured)")
        try:
            who = await self._jwt.verify(presented, header)
        except JwtRefused as refused:
            return Refused(refused.message, refused.status)
        return Principal(who.subject, who.tenant, who.scopes, credential="JWT")


def _principal(key: ApiKey) -> Principal:
    return Principal(subject=key.key_id, tenant=key.tenant, scopes=frozenset(key.scopes))


class RequireCredential:
    """ASGI middleware: 401 unless a valid credential is presented; otherwise the request's
    `Principal` is in `request.state.principal`.

    The credential comes as `Authorization: Bearer <credential>`, as the page's cookie, or
    (only for `GET /inbox`, which then moves it into the cookie) as `?token=`. `/healthz`
    is open.
    """

    def __init__(self, app: ASGIApp, *, authenticator: Authenticator) -> None:
        self._app = app
        self._auth = authenticator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path, method = scope.get("path", ""), scope.get("method", "")
        if path == HEALTH_PATH and method in ("GET", "HEAD"):
            await self._app(scope, receive, send)
            return
        presented = _presented(scope)
        found = await self._auth.resolve(presented) if presented else None
        if not isinstance(found, Principal):
            refused = found or Refused("bearer token required")
            await _unauthorized(refused.message, send, status=refused.status)
            return
        scope.setdefault("state", {})["principal"] = found
        if method in AUDITED_METHODS:
            send = self._audited(scope, found, send)
        await self._app(scope, receive, send)

    def _audited(self, scope: Scope, who: Principal, send: Send) -> Send:
        """`send`, recording who did this control action as its reply starts: by then the
        action is done (or refused) and its status known; the reply waits for the record,
        so whoever reads the log after the reply finds it."""

        async def audited(message: Message) -> None:
            if message["type"] == "http.response.start":
                await self._record(scope, who, int(message["status"]))
            await send(message)

        return audited

    async def _record(self, scope: Scope, who: Principal, status: int) -> None:
        # The router has filled in the matched route and its parameters by now.
        route = getattr(scope.get("route"), "path", None)
        params: dict[str, Any] = scope.get("path_params") or {}
        thread_id = next(
            (params[name] for name in THREAD_PARAMS if isinstance(params.get(name), str)), None
        )
        # The tenant acted on: a tenant's key acts on its own only; an operator's action
        # names the tenant of the thread, task or job its path named (`authorize`).
        acted = scope.get("state", {}).get("acted_tenant")
        entry = AuditEntry(
            at=datetime.now(UTC),
            subject=who.subject,
            tenant=who.tenant or acted,
            method=str(scope.get("method", "")),
            route=route or str(scope.get("path", "")),
            path=str(scope.get("path", "")),
            thread_id=thread_id,
            status=status,
        )
        try:
            await asyncio.to_thread(self._auth.store.audit.record, entry)
        except Exception:
            # The action is done: a lost record must not turn its reply into an error.
            log.exception("could not record %s %s by %s", entry.method, entry.path, who.subject)


def _presented(scope: Scope) -> str:
    """The credential the request presents, or ""."""
    if scope.get("path") == PAGE_PATH and scope.get("method") == "GET":
        # A credential in the page's address is the one to judge (and to keep, see
        # inbox_routes), even over an older cookie of a previous one.
        raw: bytes = scope.get("query_string", b"")
        query = parse_qs(raw.decode("latin-1"))
        if "token" in query:
            return query["token"][0]
    headers = Headers(scope=scope)
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and presented.strip():
        return presented.strip()
    return str(cookie_parser(headers.get("cookie", "")).get(TOKEN_COOKIE, ""))


async def _unauthorized(message: str, send: Send, *, status: int = 401) -> None:
    body = json.dumps({"error": message, "fields": []}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="weft"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def principal(request: Request) -> Principal:
    """The request's principal, set by `RequireCredential` on every request but
    `/healthz` (which reads none); a request without one is refused, never taken as
    anyone's."""
    found = getattr(request.state, "principal", None)
    if not isinstance(found, Principal):
        raise HTTPException(
            401, "bearer token required", {"WWW-Authenticate": 'Bearer realm="weft"'}
        )
    return found


def route_scope(method: str, path: str) -> RouteScope:
    """What the route `method path` (its template) needs; `admin` when not listed."""
    return ROUTE_SCOPES.get(("GET" if method == "HEAD" else method, path), "admin")


def authorize(store: Store, client: Client) -> Callable[[Request], Awaitable[None]]:
    """The app-wide dependency: the matched route's scope, then the tenant of a thread the
    path names."""

    async def dependency(request: Request) -> None:
        route: Any = request.scope.get("route")
        path = getattr(route, "path", None)
        if path is None:
            return
        needed = route_scope(request.method, path)
        if needed == OPEN:
            return
        who = principal(request)
        if needed != ANY and not who.may(needed):
            raise HTTPException(
                403,
                f"{who.credential} {who.subject} lacks the scope {needed!r} that {request.method} {path} needs",
            )
        tenant = who.confined_to
        if tenant is None:
            if request.method in AUDITED_METHODS:
                request.state.acted_tenant = await _acted_tenant(store, request.path_params)
            return
        for name in THREAD_PARAMS:
            thread_id = request.path_params.get(name)
            if isinstance(thread_id, str):
                await check_thread_tenant(store, client, thread_id, tenant)
        task_id = request.path_params.get("task_id")
        if isinstance(task_id, str):
            # Worded as an unknown task's 404 (`TaskNotFound`), so nothing is learnt.
            if await asyncio.to_thread(store.tasks.tenant, task_id) != tenant:
                raise HTTPException(404, f"no task {task_id!r}")
        job_id = request.path_params.get("job_id")
        if isinstance(job_id, str):
            if await asyncio.to_thread(store.jobs.tenant, job_id) != tenant:
                raise HTTPException(404, f"no job {job_id!r}")

    return dependency


async def _acted_tenant(store: Store, params: dict[str, Any]) -> str | None:
    """For the audit log of an operator's action (the server's token, an admin key): the
    tenant of the thread, task or job its path names, read from the store before the
    action (a deletion leaves nothing to read after); None when it names none."""
    thread_id = next((params[n] for n in THREAD_PARAMS if isinstance(params.get(n), str)), None)
    if thread_id is not None:
        return await asyncio.to_thread(store.threads.tenant, thread_id)
    if isinstance(task_id := params.get("task_id"), str):
        return await asyncio.to_thread(store.tasks.tenant, task_id)
    if isinstance(job_id := params.get("job_id"), str):
        return await asyncio.to_thread(store.jobs.tenant, job_id)
    return None


async def check_thread_tenant(store: Store, client: Client, thread_id: str, tenant: str) -> None:
    """404, worded as for an unknown thread, unless `thread_id` is `tenant`'s."""
    if await thread_tenant(store, client, thread_id) != tenant:
        raise HTTPException(404, f"no thread {thread_id!r}")


async def thread_tenant(store: Store, client: Client, thread_id: str) -> str | None:
    """The thread's tenant (client/thread_tenant.py): its store row's, else its `WeftTenant`
    search attribute; None for an unknown thread and for a workflow that is no thread.
    503 when Temporal does not answer."""
    try:
        return await tenant_of_thread(client, store, thread_id)
    except RPCError as err:
        raise HTTPException(503, f"Temporal did not answer ({err.message}); retry") from None


def tenant_query(tenant: str | None) -> str | None:
    """The visibility clause that keeps a listing to `tenant`'s threads (None: no clause)."""
    return None if tenant is None else tenant_clause(tenant)


__all__ = [
    "ADMIN_TOKEN",
    "ANY",
    "HEALTH_PATH",
    "OPEN",
    "PAGE_PATH",
    "ROUTE_SCOPES",
    "TOKEN_COOKIE",
    "TOKEN_SUBJECT",
    "Authenticator",
    "Principal",
    "Refused",
    "RequireCredential",
    "authorize",
    "check_thread_tenant",
    "principal",
    "route_scope",
    "tenant_query",
    "thread_tenant",
]
