"""The worker's MCP sessions, pooled by server and resolved transport, shared by calls.

A server's `command`, `args`, `env` and `cwd` (stdio) or `url` and `headers` (streamable
HTTP) are filled in from the thread's env (`${NAME}`, templating.py); the result keys the
pool, so threads whose env gives a server different secrets get different sessions, and
threads with the same env share them. A key has one session, and more (up to the
server's `maxSessions`) only while a call that may ask a person holds one alone. A session
that died is opened again on the next call (sent again only when the request surely never
reached the server); one that dies under a call gives that call an honest "outcome
unknown" error. Sessions idle for `idle_seconds` close, and past `max_sessions` the least
recently used idle one does.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import McpError

from weft.activities.mcp.results import (
    RPC_ERROR,
    SESSION_LOST,
    TIMEOUT,
    error_result,
    tool_result,
)
from weft.activities.mcp.routing import CallClock
from weft.activities.mcp.session import McpSession, NotSent, SessionLost
from weft.activities.mcp.templating import ResolvedServer, resolve
from weft.activities.mcp.types import ElicitationHandler, ListedTool, McpReply, McpUnavailable
from weft.activities.spans import without_secrets
from weft.contract.activities import ToolResult
from weft.contract.mcp import McpServerDef
from weft.contract.thread_env import EnvEntry

# A session that ends before a request could be sent is opened once more, not again.
_ATTEMPTS = 2


class McpSessionPool:
    """Per-worker MCP sessions (see the module docstring); `aclose()` ends them all."""

    def __init__(
        self,
        *,
        root: Path | None = None,
        idle_seconds: float = 300.0,
        max_sessions: int = 64,
        base_env: Mapping[str, str] | None = None,
    ) -> None:
        self._root = root
        self._base_env = base_env
        self._idle_seconds = idle_seconds
        self._max_sessions = max_sessions
        self._sessions: list[McpSession] = []  # usable or opening, least recently used first
        self._live: set[McpSession] = set()  # open, opening or closing
        # The last listing seen per key: a reopened session that lists differently is
        # reported like `list_changed` (a server restarted with other tools).
        self._known: OrderedDict[str, list[ListedTool]] = OrderedDict()
        self._closing = False

    async def list_tools(
        self, server: McpServerDef, env: Mapping[str, EnvEntry]
    ) -> list[ListedTool]:
        """The server's tools, raw, as it lists them now (clears its `list_changed`).

        Raises `McpUnavailable` when no session can be opened or the listing fails.
        """
        resolved = resolve(server, env, root=self._root, base_env=self._base_env)
        seconds = server.startup_timeout_seconds
        for _ in range(_ATTEMPTS):
            async with self._use(server, resolved, env, sole=False) as (session, listing):
                if listing is not None:
                    session.list_changed = False
                    self._remember(session.key, listing)
                    return listing
                try:
                    with anyio.fail_after(seconds):
                        listing = await session.list_tools()
                except (NotSent, SessionLost):
                    continue  # listing changes nothing: open a new session and list there
                except TimeoutError:
                    raise McpUnavailable(
                        server.name, f"did not list its tools within {seconds:g} s"
                    ) from None
                except McpError as err:
                    reason = f"refused to list its tools: {err.error.message}"
                    raise McpUnavailable(server.name, reason) from None
                self._remember(session.key, listing)
                return listing
        raise McpUnavailable(server.name, "its session ended twice while listing its tools")

    async def call_tool(
        self,
        server: McpServerDef,
        env: Mapping[str, EnvEntry],
        tool: str,
        args: dict[str, Any],
        *,
        timeout: float | None,
        elicit: ElicitationHandler | None = None,
    ) -> McpReply:
        """Call the server's `tool`; a failure of the tool, the server or the session is an
        error result. `timeout` bounds the server's work, not a person answering `elicit`.

        Raises `McpUnavailable` only when no session can be opened.
        """
        resolved = resolve(server, env, root=self._root, base_env=self._base_env)
        sole = elicit is not None
        for _ in range(_ATTEMPTS):
            async with self._use(server, resolved, env, sole=sole) as (session, listing):
                clock = CallClock(timeout)
                try:
                    with clock.scope:
                        result = await session.call(tool, args, clock, elicit)
                except NotSent:
                    continue
                except SessionLost as lost:
                    return McpReply(_lost(server.name, tool, str(lost)))
                except McpError as err:
                    message = f"MCP server {server.name!r}: {err.error.message}"
                    return McpReply(error_result(RPC_ERROR, message))
                except Exception as err:  # whatever breaks is this call's error, not a crash
                    message = f"MCP server {server.name!r}: {type(err).__name__}: {err}"
                    return McpReply(error_result(RPC_ERROR, message))
                if clock.scope.cancelled_caught:
                    return McpReply(_timed_out(server.name, tool, timeout, sent=clock.started))
                relisted = await self._relisted(session, server, listing)
                return McpReply(tool_result(result), relisted=relisted)
        raise McpUnavailable(server.name, "its session closed twice before the call was sent")

    async def aclose(self) -> None:
        """Close every session (stdio servers are stopped and reaped)."""
        self._closing = True
        async with anyio.create_task_group() as tg:
            for session in list(self._live):
                tg.start_soon(session.aclose)

    @contextlib.asynccontextmanager
    async def _use(
        self,
        server: McpServerDef,
        resolved: ResolvedServer,
        env: Mapping[str, EnvEntry],
        *,
        sole: bool,
    ) -> AsyncIterator[tuple[McpSession, list[ListedTool] | None]]:
        """A session for `resolved` (opened if need be) and, when this use opened it, its
        start-up listing. Raises `McpUnavailable`."""
        if self._closing:
            raise McpUnavailable(server.name, "the worker's MCP sessions are closed")
        session = self._choose(resolved.key(), server.max_sessions, sole=sole)
        if session is None:
            session = McpSession(
                resolved,
                startup_timeout=server.startup_timeout_seconds,
                idle_seconds=self._idle_seconds,
                redact=lambda text: without_secrets(text, env),
                on_closed=self._closed,
            )
            self._sessions.append(session)
            self._live.add(session)
            session.start()
        else:
            self._sessions.remove(session)
            self._sessions.append(session)
        session.hold(sole=sole)
        try:
            self._evict()
            listing = await session.opened()
            yield session, listing
        finally:
            session.release(sole=sole)

    def _choose(self, key: str, limit: int, *, sole: bool) -> McpSession | None:
        """The most recently used session of `key` that a call can use at once; else None
        (open another) while `key` has fewer than `limit`; else the least busy.

        A call that may be asked for elicitation has its session alone (routing.py), so
        a person's slow answer must not hold up every other thread with the same env.
        """
        mine = [s for s in self._sessions if s.key == key and s.usable]
        free = [s for s in mine if s.free_for(sole=sole)]
        if free:
            return free[-1]
        if len(mine) < limit:
            return None
        return min(mine, key=lambda s: s.users)

    async def _relisted(
        self, session: McpSession, server: McpServerDef, opened_with: list[ListedTool] | None
    ) -> list[ListedTool] | None:
        """The tools listed again when the server said they changed, or when this call
        opened a session that lists other tools than the last one did; else None."""
        if session.list_changed and session.usable:
            try:
                with anyio.fail_after(server.startup_timeout_seconds):
                    listing = await session.list_tools()
            except Exception:  # the next call on this session lists again
                session.list_changed = True
                return None
            self._remember(session.key, listing)
            return listing
        if opened_with is not None:
            before = self._known.get(session.key)
            self._remember(session.key, opened_with)
            if before is not None and before != opened_with:
                return opened_with
        return None

    def _remember(self, key: str, listing: list[ListedTool]) -> None:
        self._known[key] = listing
        self._known.move_to_end(key)
        while len(self._known) > 2 * self._max_sessions:
            self._known.popitem(last=False)

    def _evict(self) -> None:
        """Close the least recently used idle sessions past `max_sessions`."""
        while len(self._sessions) > self._max_sessions:
            victim = next((s for s in self._sessions if s.users == 0), None)
            if victim is None:
                return  # all in use: over the limit until some are released
            self._sessions.remove(victim)
            victim.close_soon()

    def _closed(self, session: McpSession) -> None:
        if session in self._sessions:
            self._sessions.remove(session)
        self._live.discard(session)


def _lost(server: str, tool: str, why: str) -> ToolResult:
    message = (
        f"MCP server {server!r} lost its session while tool {tool!r} was running{why}; the "
        "outcome is unknown: the call may or may not have taken effect"
    )
    return error_result(SESSION_LOST, message)


def _timed_out(server: str, tool: str, timeout: float | None, *, sent: bool) -> ToolResult:
    seconds = timeout or 0.0
    if sent:
        message = f"MCP server {server!r}: tool {tool!r} did not answer within {seconds:g} s"
    else:
        message = (
            f"MCP server {server!r}: tool {tool!r} was not called: its sessions stayed busy "
            f"with other calls (one may be asking a person) for {seconds:g} s"
        )
    return error_result(TIMEOUT, message)
