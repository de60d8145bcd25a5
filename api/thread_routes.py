"""Threads over HTTP: start one, list them, read one (its read model, session snapshot,
messages and files). Control (messages, turns, actions, queue, terminate) is in
`control_routes.py`; the event stream in `event_routes.py` (docs/http-api.md)."""

# No `from __future__ import annotations`: FastAPI reads the parameter annotations of the
# routes, and those name dependencies built inside `router` (a closure, not a global).

import asyncio
import base64
import binascii
import hmac
import mimetypes
import posixpath
from datetime import UTC, datetime
from typing import Annotated, Any, Literal
from urllib.parse import quote

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import Response
from pydantic import ValidationError
from temporalio.client import WorkflowExecution, WorkflowExecutionStatus
from temporalio.common import SearchAttributeKey
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from weft.api.auth import principal, tenant_query, thread_tenant
from weft.api.context import ApiContext, thread_status
from weft.api.gateway.app import GatewayError
from weft.api.idempotency import IdempotentRequest, Reply, idempotency
from weft.api.models import (
    POST_ERRORS,
    SAFE_VALUE_PATTERN,
    StartThread,
    ThreadList,
    ThreadStarted,
    ThreadSummary,
    error_responses,
)
from weft.api.quotas import refused as quota_refused
from weft.client.liveness import QUERY_TIMEOUT, UNANSWERED
from weft.client.resume import snapshot, thread_read
from weft.client.starts import ThreadStartRefused, start_confirmed
from weft.client.thread_ids import thread_id_prefix
from weft.client.thread_status import (
    STATUS_QUERIES,
    StatusFilter,
    closed_as,
    thread_state,
    threads_query,
)
from weft.client.thread_tenant import chosen_id_refusal
from weft.contract.messages import Message
from weft.contract.thread import QUERY_THREAD_READ, ThreadRead
from weft.contract.validation import describe_validation_error
from weft.store import Store
from weft.store.file_paths import InvalidPathError, normalize_path
from weft.store.tenant_quotas import QuotaExceeded

# How long `POST /threads` waits for a worker's verdict before answering unconfirmed.
CONFIRM_SECONDS = 10.0

# The keys of workflows/search_attributes.py, by name (api/ does not import workflows/).
AGENT = SearchAttributeKey.for_keyword("WeftAgent")
STATUS = SearchAttributeKey.for_keyword("WeftStatus")
SESSION = SearchAttributeKey.for_keyword("WeftSession")
AWAITING_ACTION = SearchAttributeKey.for_keyword("WeftAwaitingAction")

# Path parameters: any thread or message id Temporal and the store can hold, but no
# control characters (PostgreSQL text cannot hold NUL).
ID_PATH_PATTERN = r"^[^\x00-\x1f\x7f]{1,1000}$"
ThreadId = Annotated[str, Path(pattern=ID_PATH_PATTERN, description="the thread (workflow) id")]

_AWAITING_QUERIES = {
    "ask_human": "WeftAwaitingAction = 'ask_human'",
    "tool_permission": "WeftAwaitingAction = 'tool_permission'",
    "elicitation": "WeftAwaitingAction = 'elicitation'",
    "any": "WeftAwaitingAction IN ('ask_human', 'tool_permission', 'elicitation')",
}
_ACTION_KINDS = ("ask_human", "tool_permission", "elicitation")

# Served inline: types a browser shows without running anything. Everything else is an
# attachment, and every file reply forbids sniffing and scripts.
_INLINE_TYPES = {
    "text/plain",
    "text/csv",
    "text/markdown",
    "application/json",
    "application/pdf",
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
}
_FILE_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
    "Cache-Control": "no-store",
}


def router(ctx: ApiContext) -> APIRouter:
    """The thread routes over `ctx`."""
    routes = APIRouter(tags=["threads"])
    Idempotent = Annotated[IdempotentRequest, Depends(idempotency(ctx.store))]
    base_query = _base_query(ctx.task_queue)
    page_tokens = PageTokens(ctx.store)

    @routes.post(
        "/threads",
        status_code=201,
        response_model=ThreadStarted,
        responses=error_responses(*POST_ERRORS, 429, 503),
        summary="Start a thread; the worker's verdict on it is waited for",
    )
    async def start_thread(body: StartThread, request: Idempotent, http: Request) -> Response:
        # A tenant's key starts its tenant's threads; the server's token and `admin` keys
        # start the body's `tenant`'s (none: `default`'s).
        confined = principal(http).confined_to
        tenant = _start_tenant(confined, body.tenant)
        return await request.run(lambda: _start(ctx, body, request, tenant, confined))

    @routes.get(
        "/threads",
        response_model=ThreadList,
        responses=error_responses(422, 503),
        summary="List threads (Temporal visibility: eventually consistent)",
    )
    async def list_threads(
        http: Request,
        agent: Annotated[str | None, Query(pattern=SAFE_VALUE_PATTERN)] = None,
        # The CLI's vocabulary and filters (docs/thread-status.md); another value is 422.
        status: Annotated[StatusFilter | None, Query()] = None,
        session: Annotated[str | None, Query(pattern=SAFE_VALUE_PATTERN)] = None,
        awaiting: Annotated[
            Literal["ask_human", "tool_permission", "elicitation", "any"] | None, Query()
        ] = None,
        limit: Annotated[int, Query(ge=1, le=100)] = 50,
        page_token: Annotated[str | None, Query(alias="pageToken", max_length=8192)] = None,
    ) -> ThreadList:
        # A tenant's key lists its tenant's threads only; the clause is part of the query
        # its page tokens are sealed with, so no token crosses tenants either.
        tenant = tenant_query(principal(http).confined_to)
        query = " AND ".join(
            [
                base_query,
                *([tenant] if tenant else []),
                *([f"WeftAgent = '{agent}'"] if agent else []),
                *([f"WeftSession = '{session}'"] if session else []),
                *([STATUS_QUERIES[status]] if status else []),
                *([_AWAITING_QUERIES[awaiting]] if awaiting else []),
            ]
        )
        return await _list(ctx, page_tokens, query, limit, page_token)

    @routes.get(
        "/threads/{thread_id}",
        response_model=ThreadRead,
        responses=error_responses(404, 422, 503),
        summary="The thread read model: live, or the last one it stored",
    )
    async def read_thread(thread_id: ThreadId) -> ThreadRead:
        read = await thread_read(ctx.client, ctx.store, thread_id)
        if read is None:
            raise await not_readable(ctx, thread_id)
        return read

    @routes.get(
        "/threads/{thread_id}/session",
        response_model=dict[str, Any],
        responses=error_responses(404, 422, 503),
        summary="The session snapshot: the thread's shell and a window of messages (with "
        "their stored content), and `eventsCursor`: follow the events after it",
    )
    async def read_session(
        thread_id: ThreadId,
        before: Annotated[int | None, Query(ge=0, description="a position: older")] = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        # Read before the snapshot: every event after this cursor may repeat what the
        # snapshot shows, and none the snapshot lacks is at or before it.
        cursor = await asyncio.to_thread(ctx.store.events.last_sequence, thread_id)
        found = await snapshot(ctx.client, ctx.store, thread_id, before=before, limit=limit)
        if found is None:
            raise await not_readable(ctx, thread_id)
        return {**found, "eventsCursor": cursor}

    @routes.get(
        "/threads/{thread_id}/messages/{message_id}",
        response_model=Message,
        responses=error_responses(404, 422),
        summary="One stored message, whole (content stored as a blob included)",
    )
    async def read_message(
        thread_id: ThreadId,
        message_id: Annotated[str, Path(pattern=ID_PATH_PATTERN)],
    ) -> Message:
        # Stored whole: the activity that writes a message queued as a blob resolves it
        # first (activities/spill.py `resolve_content_refs`).
        message = await asyncio.to_thread(ctx.store.messages.get, thread_id, message_id)
        if message is None:
            message = await _stored_soon(ctx, thread_id, message_id)
        if message is None:
            raise GatewayError(404, f"thread {thread_id!r} has no stored message {message_id!r}")
        return message

    @routes.get(
        "/threads/{thread_id}/files/{path:path}",
        response_class=Response,
        responses={
            200: {
                "description": "the file's bytes, as its type (an attachment unless safe)",
                "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
            },
            **error_responses(400, 404, 422),
        },
        summary="A file of the thread's filesystem",
    )
    async def read_file(thread_id: ThreadId, path: str) -> Response:
        return await asyncio.to_thread(_file, ctx, thread_id, path)

    return routes


# A message a live thread lists before its step's activity has stored it: how long a read
# of it waits for the store, and how often it looks.
STORED_WAIT_SECONDS = 10.0
_STORED_POLL_SECONDS = 0.05


async def _stored_soon(ctx: ApiContext, thread_id: str, message_id: str) -> Message | None:
    """The message once stored, when the live thread's session snapshot lists it (the
    workflow has it; the step's activity stores it a moment later, beside its model
    request: activities/model_call.py `beside`); None at once for a message it does not
    list, and after `STORED_WAIT_SECONDS` for one never stored."""
    found = await snapshot(ctx.client, ctx.store, thread_id)
    listed = any(
        isinstance(m, dict) and m.get("id") == message_id
        for t in (found or {}).get("threads", [])
        for m in (t.get("history") or {}).get("messages", [])
    )
    if not listed:
        return None
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STORED_WAIT_SECONDS
    while loop.time() < deadline:
        await asyncio.sleep(_STORED_POLL_SECONDS)
        message = await asyncio.to_thread(ctx.store.messages.get, thread_id, message_id)
        if message is not None:
            return message
    return None


# -- POST /threads ------------------------------------------------------------------------


async def _start(
    ctx: ApiContext,
    body: StartThread,
    request: IdempotentRequest,
    tenant: str | None,
    confined: str | None,
) -> Reply:
    """Start `body` as `tenant`'s thread (None: `default`'s); a key `confined` to a tenant
    chooses only the ids `check_chosen_id` allows, the operator's any."""
    # With a key and no id of its own, the thread id comes from the key: a retry after a
    # crash between starting and recording finds the thread it started, never a second.
    # Readable like every generated id (`<agent>-…`), and the same for the same key.
    derived = request.derived_id(thread_id_prefix(body.agent)) if body.thread_id is None else None
    thread_id = body.thread_id or derived
    if confined is not None and body.thread_id is not None:
        await check_chosen_id(ctx, body.thread_id, confined, field="threadId")
    try:
        started = await start_confirmed(
            ctx.threads,
            body.agent,
            messages=body.start_messages(),
            thread_id=thread_id,
            timeout=CONFIRM_SECONDS,
            **body.start_fields(),
            **({"tenant": tenant} if tenant else {}),
        )
    except ThreadStartRefused as err:
        raise GatewayError(
            422, f"the worker refused agent {body.agent!r}: {err.reason}", fields=["agent"]
        ) from None
    except QuotaExceeded as err:  # nothing started: the tenant is at a quota
        raise quota_refused(err) from None
    except WorkflowAlreadyStartedError:
        if derived is not None:
            return await _started_before(ctx, derived)
        raise GatewayError(
            409, f"thread {thread_id!r} already exists", fields=["threadId"]
        ) from None
    except ValidationError as err:
        raise GatewayError(422, describe_validation_error(err)) from None
    except RPCError as err:
        raise GatewayError(503, f"Temporal did not start the thread ({err.message})") from None
    handle = started.handle
    return Reply(
        201,
        ThreadStarted(
            thread_id=handle.id,
            run_id=handle.first_execution_run_id or handle.run_id,
            confirmed=started.confirmed,
        ),
    )


def _start_tenant(confined_to: str | None, named: str | None) -> str | None:
    """The tenant a start is for: the key's (a tenant's key naming another tenant is 403
    naming `tenant`: a key acts for its tenant only), else the one the body names (None:
    `default`)."""
    if confined_to is None:
        return named
    if named not in (None, confined_to):
        raise GatewayError(
            403,
            f"tenant {named!r}: this key starts threads of tenant {confined_to!r} only",
            fields=["tenant"],
        )
    return confined_to


async def check_chosen_id(ctx: ApiContext, thread_id: str, tenant: str, *, field: str) -> None:
    """422 naming `field` unless a key of `tenant` may name `thread_id` for a new thread (or
    import): client/thread_tenant.py `chosen_id_refusal` says when, and why an answer that
    depends on another tenant's ids would leak them."""
    holder = await thread_tenant(ctx.store, ctx.client, thread_id)
    refusal = chosen_id_refusal(holder, thread_id, tenant)
    if refusal is not None:
        raise GatewayError(422, f"{field}: {refusal}", fields=[field])


async def _started_before(ctx: ApiContext, thread_id: str) -> Reply:
    """The thread this key started in an earlier attempt, as that attempt would answer."""
    handle = ctx.client.get_workflow_handle(thread_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        raise GatewayError(503, f"Temporal did not answer ({err.message}); retry") from None
    confirmed = described.status == WorkflowExecutionStatus.COMPLETED
    if described.status == WorkflowExecutionStatus.RUNNING:
        try:
            read = await handle.query(
                QUERY_THREAD_READ, result_type=ThreadRead, rpc_timeout=QUERY_TIMEOUT
            )
            confirmed = ThreadRead.model_validate(read).status != "preparing"
        except UNANSWERED:
            confirmed = False
    return Reply(
        201, ThreadStarted(thread_id=thread_id, run_id=described.run_id, confirmed=confirmed)
    )


# -- GET /threads -------------------------------------------------------------------------


def _base_query(task_queue: str) -> str:
    """The threads this server serves: AgentThread runs on its task queue, latest runs only."""
    return threads_query(task_queue)


async def _list(
    ctx: ApiContext, tokens: "PageTokens", query: str, limit: int, page_token: str | None
) -> ThreadList:
    token = await tokens.open(query, page_token) if page_token else None
    listing = ctx.client.list_workflows(query, page_size=limit, next_page_token=token)
    try:
        await listing.fetch_next_page()
    except RPCError as err:
        raise GatewayError(503, f"Temporal did not list threads ({err.message})") from None
    page = listing.current_page or []
    next_token = listing.next_page_token
    return ThreadList(
        threads=[_summary(execution) for execution in page],
        next_page_token=await tokens.seal(query, next_token) if next_token else None,
    )


# Page tokens are Temporal's, sealed with a key kept in the store (`serve_secrets`):
# Temporal retries a call with a token it cannot parse for seconds, so only tokens a weft
# server on this store issued, for the same filters (and tenant), ever reach it. Every
# replica reads the same key, so a token is good at any of them and after a restart.
PAGE_TOKEN_SECRET = "page-tokens"
_TAG_BYTES = 16


class PageTokens:
    """Seals Temporal's page tokens to the query they page through, and opens them."""

    def __init__(self, store: Store) -> None:
        self._secrets = store.serve_secrets
        self._key: bytes | None = None  # read from the store at the first listing

    async def seal(self, query: str, token: bytes) -> str:
        tag = await self._tag(query, token)
        return base64.urlsafe_b64encode(tag + token).decode().rstrip("=")

    async def open(self, query: str, text: str) -> bytes:
        """Temporal's token inside `text`; 422 naming `pageToken` unless a server on this
        store sealed it for `query`."""
        try:
            sealed = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):
            sealed = b""
        tag, token = sealed[:_TAG_BYTES], sealed[_TAG_BYTES:]
        if not token or not hmac.compare_digest(tag, await self._tag(query, token)):
            raise GatewayError(
                422,
                "pageToken: not a token this server gave for these filters; list again "
                "from the first page",
                fields=["pageToken"],
            )
        return token

    async def _tag(self, query: str, token: bytes) -> bytes:
        if self._key is None:
            self._key = await asyncio.to_thread(self._secrets.get, PAGE_TOKEN_SECRET)
        return hmac.digest(self._key, query.encode() + b"\0" + token, "sha256")[:_TAG_BYTES]


def _summary(execution: WorkflowExecution) -> ThreadSummary:
    attributes = execution.typed_search_attributes
    status = execution.status or WorkflowExecutionStatus.RUNNING
    awaiting = attributes.get(AWAITING_ACTION)
    running = status == WorkflowExecutionStatus.RUNNING
    return ThreadSummary(
        thread_id=execution.id,
        agent=attributes.get(AGENT),
        status=thread_state(status, attributes.get(STATUS)),
        thread_status=attributes.get(STATUS),
        session_id=attributes.get(SESSION),
        awaiting_action=awaiting if running and awaiting in _ACTION_KINDS else None,
        started_at=_iso(execution.start_time),
    )


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- reads --------------------------------------------------------------------------------


async def not_readable(ctx: ApiContext, thread_id: str) -> GatewayError:
    """Why a thread has no read model: unknown (404), no worker answers (503), or it
    closed before it wrote one (404)."""
    status = await thread_status(ctx, thread_id)  # raises 404 when Temporal does not know it
    if status == WorkflowExecutionStatus.RUNNING:
        return GatewayError(
            503, f"thread {thread_id!r} is running but no worker answered for it; retry"
        )
    return GatewayError(
        404, f"thread {thread_id!r} closed ({closed_as(status)}) before it recorded its state"
    )


def _file(ctx: ApiContext, thread_id: str, path: str) -> Response:
    try:
        normalized = normalize_path("/" + path)
    except InvalidPathError as err:
        raise GatewayError(400, str(err), fields=["path"]) from None
    stat = ctx.store.files.stat_file(thread_id, normalized)
    if stat is None or stat.kind != "file":
        raise GatewayError(404, f"thread {thread_id!r} has no file {normalized!r}")
    try:
        data = ctx.store.files.read_file(thread_id, normalized)
    except (FileNotFoundError, IsADirectoryError) as err:
        raise GatewayError(404, str(err)) from None
    media_type = stat.mime_type or mimetypes.guess_type(normalized)[0] or "application/octet-stream"
    base_type = media_type.split(";")[0].strip().lower()
    disposition = "inline" if base_type in _INLINE_TYPES else "attachment"
    if disposition == "attachment" and base_type.startswith("text/"):
        # Never let a browser render stored HTML, SVG or scripts from this origin.
        media_type = "application/octet-stream"
    headers = {**_FILE_HEADERS, "Content-Disposition": _disposition(disposition, normalized)}
    return Response(data, media_type=media_type, headers=headers)


def _disposition(kind: str, path: str) -> str:
    name = posixpath.basename(path)
    fallback = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name
    )
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


__all__ = ["CONFIRM_SECONDS", "check_chosen_id", "router"]
