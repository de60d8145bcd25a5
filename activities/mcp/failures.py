"""Why an MCP session did not start or ended, in one sentence naming what happened.

anyio's task groups wrap what went wrong in exception groups, often nested; the leaves
say it (a missing command, a refused connection, a closed pipe, a timeout).
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx
from mcp import types
from mcp.shared.exceptions import McpError

from weft.activities.mcp.templating import ResolvedServer

_TAIL_CHARS = 1000


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside `exc`'s (nested) groups, or `exc` itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def sole_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The one exception a task group wrapped (the group itself when there are more)."""
    found = leaves(group)
    return found[0] if len(found) == 1 else group


def stderr_tail(raw: bytes) -> str:
    """`; its stderr ended with: …` (empty when it wrote nothing)."""
    text = raw.decode("utf-8", errors="replace").strip()
    if not text:
        return ""
    if len(text) > _TAIL_CHARS:
        text = "…" + text[-_TAIL_CHARS:]
    return f"; its stderr ended with: {text}"


def describe_start_failure(
    server: ResolvedServer,
    errors: Sequence[BaseException],
    timeout: float,
    notes: Sequence[str],
) -> str:
    """What stopped `server`'s session from opening (spawn or connect, `initialize`, the
    first `tools/list`)."""
    reason = _first_reason(server, errors, timeout)
    if notes:
        reason += f"; it sent what is not MCP: {notes[0]}"
    return reason


def _first_reason(server: ResolvedServer, errors: Sequence[BaseException], timeout: float) -> str:
    target = f"command {server.command!r}" if server.transport == "stdio" else server.url
    for err in errors:
        # Spawning failed (TimeoutError and a broken pipe are OSErrors too, but not this).
        if isinstance(err, OSError) and not isinstance(err, TimeoutError | ConnectionError):
            what = err.strerror or str(err)
            if isinstance(err, FileNotFoundError) and err.filename in (None, server.command):
                what = "not found"
            elif err.filename is not None:
                what = f"{what}: {err.filename}"
            return f"could not run {target}: {what}"
    for err in errors:
        if isinstance(err, httpx.HTTPStatusError):
            return f"{target} answered HTTP {err.response.status_code} while starting"
        if isinstance(err, httpx.ConnectError):
            return f"could not connect to {target}: {err}"
        if isinstance(err, httpx.TransportError):
            return f"{target} failed while starting: {type(err).__name__}: {err}"
    for err in errors:
        if isinstance(err, McpError) and err.error.code == types.CONNECTION_CLOSED:
            if server.transport == "stdio":
                return "its process ended before it finished starting (initialize, tools/list)"
            return "the connection closed before it finished starting"
        if isinstance(err, McpError):
            return f"refused to start: {err.error.message}"
    for err in errors:
        if isinstance(err, TimeoutError):
            return (
                f"did not answer `initialize` and `tools/list` within {timeout:g} s "
                "(the startup timeout)"
            )
    for err in errors:
        if isinstance(err, Exception):
            return f"failed while starting: {type(err).__name__}: {err}"
    return "was closed while it was starting"
