"""One MCP session, held open by a task of its own until it is closed or its server dies.

anyio's context managers (the SDK's transports and `ClientSession`) must be entered and
exited in the same task, and a session outlives the activity that opened it; so each
session has an owner task that opens it, waits, and closes it. Calls from any task use it
concurrently (the SDK matches replies to requests).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.abc
import httpx
from anyio.streams.memory import MemoryObjectSendStream
from mcp import ClientSession, types
from mcp.shared.context import RequestContext
from mcp.shared.exceptions import McpError
from mcp.shared.message import SessionMessage
from mcp.shared.session import RequestResponder

from weft.activities.mcp.failures import describe_start_failure, leaves, sole_error, stderr_tail
from weft.activities.mcp.results import listed_tool
from weft.activities.mcp.routing import CallClock, CallGate, ElicitReply, ElicitRoute, declined
from weft.activities.mcp.templating import ResolvedServer
from weft.activities.mcp.transports import Inbound, StderrTail, connect
from weft.activities.mcp.types import ElicitationHandler, ListedTool, McpUnavailable

logger = logging.getLogger(__name__)

CLIENT_INFO = types.Implementation(name="weft", version="1")
# Closing an HTTP session waits this long for its DELETE (a stdio server is given 2 s
# after its stdin closes, then 2 s after SIGTERM, by the SDK); a lost call waits this long
# for its session to be closed.
CLOSE_GRACE_SECONDS = 6.0
_MAX_LIST_PAGES = 100
_NOTE_CHARS = 300
# The streamable HTTP transport's answer to a request for a session the server no
# longer knows (HTTP 404): the server did not run it.
_SESSION_TERMINATED = "Session terminated"

# How long a call that timed out or was cancelled may take to tell its server.
_CANCEL_NOTICE_SECONDS = 1.0

T = TypeVar("T")
Message = RequestResponder[types.ServerRequest, types.ClientResult] | types.ServerNotification


class NotSent(Exception):
    """The request surely never reached the server: it may be sent on a new session."""


class SessionLost(Exception):
    """The session ended while a request was in flight: its outcome is unknown."""


class McpSession:
    """An MCP session to one resolved server, owned by its own task."""

    def __init__(
        self,
        server: ResolvedServer,
        *,
        startup_timeout: float,
        idle_seconds: float,
        redact: Callable[[str], str],
        on_closed: Callable[[McpSession], None],
    ) -> None:
        self.server = server
        self.key = server.key()
        self.list_changed = False
        self.last_used = anyio.current_time()
        self._startup_timeout = startup_timeout
        self._idle_seconds = idle_seconds
        self._redact = redact
        self._on_closed = on_closed
        self._ready = anyio.Event()
        self._settled = anyio.Event()  # ready, or ended without being ready
        self._stop = anyio.Event()  # closing, or the connection ended
        self._close_requested = False
        self._done = anyio.Event()
        self._client: ClientSession | None = None
        self._listing: list[ListedTool] | None = None
        self._failure = "closed before it started"
        self._ended: list[BaseException] = []
        self._notes: list[str] = []
        self._stderr = StderrTail()
        self._users = 0
        self._sole_users = 0
        self._in_flight = 0
        self._requests: set[anyio.CancelScope] = set()
        self._gate = CallGate()
        self._route: ElicitRoute | None = None
        self._task: asyncio.Task[None] | None = None
        self._http_close = anyio.CancelScope()  # bounds an HTTP session's close

    # -- life ---------------------------------------------------------------------------

    def start(self) -> None:
        # A context of its own: the session outlives the activity that opened it, and
        # must not carry that activity's context (or its span) into later calls.
        self._task = asyncio.create_task(self._own(), context=contextvars.Context())

    async def opened(self) -> list[ListedTool] | None:
        """Wait until the session is open; its start-up listing, the first time only.
        Raises `McpUnavailable` when it could not be opened."""
        await self._settled.wait()
        if self._client is None or self._done.is_set():
            raise McpUnavailable(self.server.name, self._failure)
        listing, self._listing = self._listing, None
        return listing

    @property
    def usable(self) -> bool:
        """Open (or opening) and not ended or closing."""
        return not (self._stop.is_set() or self._done.is_set())

    @property
    def users(self) -> int:
        return self._users

    def free_for(self, *, sole: bool) -> bool:
        """Whether a call could use the session now: alone, or beside calls that share."""
        return self._users == 0 if sole else self._sole_users == 0

    def hold(self, *, sole: bool) -> None:
        """A caller is using the session: it is not closed for idleness meanwhile."""
        self._users += 1
        self._sole_users += sole

    def release(self, *, sole: bool) -> None:
        self._users -= 1
        self._sole_users -= sole
        self.last_used = anyio.current_time()

    def close_soon(self) -> None:
        self._close_requested = True
        self._stop.set()

    async def aclose(self) -> None:
        self.close_soon()
        await self._done.wait()

    async def _own(self) -> None:
        try:
            async with anyio.create_task_group() as tg:
                try:
                    await self._serve(tg)
                finally:
                    tg.cancel_scope.cancel()
        except BaseException as exc:
            self._ended = leaves(exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            if not self._ready.is_set():
                reason = describe_start_failure(
                    self.server, self._ended, self._startup_timeout, self._notes
                )
                tail = stderr_tail(bytes(self._stderr.data))
                self._failure = self._redact(f"{reason}{tail}")
            self._done.set()
            self._settled.set()
            for request in self._requests:
                request.cancel()
            self._on_closed(self)

    async def _serve(self, tg: anyio.abc.TaskGroup) -> None:
        # Only start-up is cut off, never the transport's exit: cancelled, the SDK's stdio
        # client skips its shutdown (the process is killed, its streams left open).
        starting = anyio.CancelScope(deadline=anyio.current_time() + self._startup_timeout)
        tg.start_soon(self._cancel_start_when_closed, starting)
        async with connect(self.server, stderr=self._stderr, http_close=self._http_close) as (
            read,
            write,
        ):
            inbound_send, inbound = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            try:
                tg.start_soon(self._pump, read, inbound_send)
                async with ClientSession(
                    inbound,
                    write,
                    elicitation_callback=self._elicited,
                    message_handler=self._on_message,
                    client_info=CLIENT_INFO,
                ) as client:
                    with starting:
                        await client.initialize()
                        self._listing = await _list_all(client)
                    if starting.cancelled_caught:
                        if self._close_requested:
                            return
                        raise TimeoutError
                    self._client = client
                    self._ready.set()
                    self._settled.set()
                    await self._wait_for_stop()
                    self._http_close.deadline = anyio.current_time() + CLOSE_GRACE_SECONDS
            finally:
                # Closed here too: a pump cancelled before it ran closes nothing.
                inbound_send.close()
                inbound.close()

    async def _cancel_start_when_closed(self, scope: anyio.CancelScope) -> None:
        await self._stop.wait()
        if self._close_requested and not self._ready.is_set():
            scope.cancel()

    async def _wait_for_stop(self) -> None:
        """Until closed, or the connection ends, or idle for `idle_seconds`."""
        while not self._stop.is_set():
            quiet = anyio.current_time() - self.last_used
            wait = self._idle_seconds - quiet if self._users == 0 else self._idle_seconds
            if wait <= 0:
                self.close_soon()
                break
            with anyio.move_on_after(wait):
                await self._stop.wait()

    async def _pump(
        self,
        read: Inbound,
        inbound: MemoryObjectSendStream[SessionMessage | Exception],
    ) -> None:
        """Pass the server's messages to the session; when they end, the session has."""
        try:
            async for message in read:
                await inbound.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            # Ended before the session learns it: a call that then fails knows why.
            self._stop.set()
            inbound.close()

    # -- calls --------------------------------------------------------------------------

    async def list_tools(self) -> list[ListedTool]:
        """The server's tools now (clears `list_changed`). Raises `NotSent`, `SessionLost`
        or `McpError`."""
        self.list_changed = False
        return await self._request(_list_all)

    async def call(
        self,
        tool: str,
        args: dict[str, Any],
        clock: CallClock,
        elicit: ElicitationHandler | None,
    ) -> types.CallToolResult:
        """Call `tool` within `clock` (its scope is the caller's to enter). Raises
        `NotSent`, `SessionLost` or `McpError` (the server's JSON-RPC error)."""
        sole = elicit is not None
        await self._gate.acquire(sole=sole)
        clock.started = True
        sent: list[types.RequestId] = []
        try:
            async with self._routed(elicit, clock):
                request = types.ClientRequest(
                    types.CallToolRequest(
                        params=types.CallToolRequestParams(name=tool, arguments=args)
                    )
                )

                def send(client: ClientSession) -> Awaitable[types.CallToolResult]:
                    request_id = _next_request_id(client)
                    if request_id is not None:
                        sent.append(request_id)
                    # Not `ClientSession.call_tool`: its output-schema check may list the
                    # tools after the call, and a failure there would look like one before.
                    return client.send_request(request, types.CallToolResult)

                return await self._request(send)
        except anyio.get_cancelled_exc_class():
            # Timed out or cancelled: tell the server, so it stops working for nobody.
            timed_out = anyio.current_time() >= clock.scope.deadline
            await self._cancel_sent(sent, "timed out" if timed_out else "cancelled")
            raise
        finally:
            self._gate.release(sole=sole)

    async def _cancel_sent(self, sent: list[types.RequestId], reason: str) -> None:
        """Send `notifications/cancelled` for the request in `sent` (when it was sent and
        the session still stands); best effort, and never longer than a second."""
        client = self._client
        if not sent or client is None or not self.usable:
            return
        params = types.CancelledNotificationParams(requestId=sent[0], reason=reason)
        notice = types.ClientNotification(types.CancelledNotification(params=params))
        with anyio.move_on_after(_CANCEL_NOTICE_SECONDS, shield=True):
            try:
                await client.send_notification(notice)
            except Exception as err:  # the session is ending: nothing left to stop
                logger.debug("MCP server %r: no cancel notice sent: %s", self.server.name, err)

    async def _request(self, send: Callable[[ClientSession], Awaitable[T]]) -> T:
        client = self._client
        if client is None or not self.usable:
            raise NotSent
        # Ended by the owner when the session ends: the SDK fails requests still waiting
        # only when its receive loop is not cancelled first, and closing cancels it.
        aborted = anyio.CancelScope()
        self._requests.add(aborted)
        self._in_flight += 1
        try:
            with aborted:
                return await send(client)
            raise await self._lost()
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise NotSent from None  # the session's streams closed before it was written
        except McpError as err:
            if err.error.code == types.CONNECTION_CLOSED:
                raise await self._lost() from None
            if err.error.message == _SESSION_TERMINATED:
                self.close_soon()
                raise NotSent from None
            raise
        finally:
            self._in_flight -= 1
            self._requests.discard(aborted)

    async def _lost(self) -> Exception:
        """NotSent when the connection failed before this, the only request, was sent."""
        self.close_soon()
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE_SECONDS):
            await self._done.wait()
        refused = any(isinstance(e, httpx.ConnectError) for e in self._ended)
        return NotSent() if refused and self._in_flight == 1 else SessionLost(self.describe_end())

    def describe_end(self) -> str:
        """Why the session ended, as far as is known, and the stderr tail."""
        causes = [f"{type(e).__name__}: {e}" for e in self._ended if str(e)]
        said = f" ({'; '.join(causes)})" if causes else ""
        return self._redact(f"{said}{stderr_tail(bytes(self._stderr.data))}")

    @contextlib.asynccontextmanager
    async def _routed(
        self, elicit: ElicitationHandler | None, clock: CallClock
    ) -> AsyncIterator[None]:
        if elicit is None:
            yield
            return
        route = ElicitRoute(elicit, clock)
        self._route = route
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(route.serve)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        except ExceptionGroup as group:
            raise sole_error(group) from None
        finally:
            self._route = None
            route.close()

    # -- what the server sends ------------------------------------------------------------

    async def _elicited(
        self, context: RequestContext[ClientSession, Any], params: types.ElicitRequestParams
    ) -> ElicitReply:
        route = self._route
        if route is None:
            return declined("no call on this session can ask a person")
        return await route.ask(params)

    async def _on_message(self, message: Message | Exception) -> None:
        if isinstance(message, Exception):
            # Not MCP on the wire (or a reply nobody waits for any more, after a timeout).
            if not self._ready.is_set():
                said = " ".join(str(message).split())[:_NOTE_CHARS]
                self._notes.append(f"{type(message).__name__}: {said}")
            logger.debug("MCP server %r: %s", self.server.name, message)
            return
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self.list_changed = True


async def _list_all(client: ClientSession) -> list[ListedTool]:
    """Every page of the server's `tools/list`."""
    tools: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(_MAX_LIST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await client.list_tools(params=params)
        tools += [listed_tool(tool) for tool in page.tools]
        cursor = page.nextCursor
        if not cursor:
            break
    return tools


def _next_request_id(client: ClientSession) -> int | None:
    """The id `client`'s next request will carry (None when this SDK keeps it elsewhere:
    the call then goes without a cancel notice).

    The SDK numbers requests itself and does not hand the number out; `send_request` takes
    the counter before its first await, so nothing can be sent in between when it is read
    just before. tests/mcp/test_mcp_pool.py fails if the counter moves.
    """
    counter = getattr(client, "_request_id", None)
    return counter if isinstance(counter, int) else None
