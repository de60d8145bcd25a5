"""The SDK's two client transports for a resolved server: stdio (a subprocess whose stderr
tail is kept) and streamable HTTP.

Both yield the SDK's `(read, write)` streams for a `ClientSession`; both must be entered
and left in one task (the session's owner).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator

import anyio
import httpx
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from weft.activities.mcp.templating import ResolvedServer

Inbound = MemoryObjectReceiveStream[SessionMessage | Exception]
Outbound = MemoryObjectSendStream[SessionMessage]

_TAIL_BYTES = 4096
# Connect and write as the SDK's default client; an SSE stream may stay quiet for long.
_HTTP_TIMEOUT = httpx.Timeout(30.0, read=300.0)


class StderrTail:
    """The last few KiB a stdio server wrote to its stderr: it says why a server died."""

    def __init__(self) -> None:
        self.data = bytearray()

    async def follow(self, fd: int) -> None:
        """Keep reading `fd` (non-blocking) until its end."""
        while True:
            await anyio.wait_readable(fd)
            if not self.drain(fd):
                return

    def drain(self, fd: int) -> bool:
        """Read what is there now; False at end of file."""
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return True
            if not chunk:
                return False
            self.data += chunk
            del self.data[:-_TAIL_BYTES]


@contextlib.asynccontextmanager
async def connect(
    server: ResolvedServer, *, stderr: StderrTail, http_close: anyio.CancelScope
) -> AsyncIterator[tuple[Inbound, Outbound]]:
    """The transport to `server`. An HTTP session's close is bounded by `http_close`
    (its DELETE may hang); a stdio one is bounded by the SDK (stdin, SIGTERM, SIGKILL)."""
    if server.transport == "http":
        with http_close:
            async with _http(server) as streams:
                yield streams
        return
    async with _stdio(server, stderr) as streams:
        yield streams


@contextlib.asynccontextmanager
async def _http(server: ResolvedServer) -> AsyncIterator[tuple[Inbound, Outbound]]:
    async with httpx.AsyncClient(headers=dict(server.headers), timeout=_HTTP_TIMEOUT) as http:
        opened: list[Inbound] = []
        try:
            async with streamable_http_client(server.url, http_client=http) as (read, write, _):
                opened.append(read)
                yield read, write
        finally:
            for read in opened:
                read.close()  # the SDK leaves its read end to the session: here, ours


@contextlib.asynccontextmanager
async def _stdio(
    server: ResolvedServer, stderr: StderrTail
) -> AsyncIterator[tuple[Inbound, Outbound]]:
    params = StdioServerParameters(
        command=server.command, args=list(server.args), env=server.process_env(), cwd=server.cwd
    )
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    errlog = os.fdopen(write_fd, "w")
    try:
        async with stdio_client(params, errlog=errlog) as streams:
            errlog.close()  # the child has its own copy: the pipe ends when it does
            async with anyio.create_task_group() as readers:
                readers.start_soon(stderr.follow, read_fd)
                try:
                    yield streams
                finally:
                    readers.cancel_scope.cancel()
    finally:
        errlog.close()
        stderr.drain(read_fd)  # what a process that exited at once said
        os.close(read_fd)
