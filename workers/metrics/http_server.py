"""A small HTTP/1.1 server for `GET /metrics`, on the worker's event loop.

Prometheus scrapes one path with keep-alive connections; a web framework would add a
dependency tree and its own signal handling to the worker process for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable

# Prometheus' text format, version 0.0.4: what Prometheus and the SDK exporter speak.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# A keep-alive connection left idle this long is closed.
_IDLE_SECONDS = 75.0
_MAX_HEADERS = 100

Render = Callable[[], Awaitable[bytes]]


class MetricsServer:
    """Serves `render()` at `/metrics` until closed; `url` says where once started."""

    def __init__(self, render: Render) -> None:
        self._render = render
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()
        self.url = ""

    async def start(self, host: str, port: int) -> str:
        """Listen on `host`:`port` (0 picks a free port); returns the endpoint's URL."""
        self._server = await asyncio.start_server(self._serve, host, port)
        bound_host, bound_port = self._server.sockets[0].getsockname()[:2]
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url = f"http://{shown}:{bound_port}/metrics"
        return self.url

    async def close(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for writer in list(self._connections):  # idle keep-alive connections
            writer.close()
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = writer.get_extra_info("socket")
        if connection is not None:
            # Without it a keep-alive reply waits for the scraper's delayed ACK (~40 ms).
            connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._connections.add(writer)
        try:
            while await self._answer(reader, writer):
                pass
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, ValueError):
            pass  # the scraper went away, idled out, or sent what is not HTTP
        finally:
            self._connections.discard(writer)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; whether the connection stays open."""
        line = await asyncio.wait_for(reader.readline(), _IDLE_SECONDS)
        if not line:
            return False
        method, target, version = line.decode("latin-1").split()
        headers = await _headers(reader)
        body_length = int(headers.get("content-length", "0"))
        if body_length:
            await reader.readexactly(body_length)
        keep_alive = _keep_alive(version, headers.get("connection", ""))
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            status, body = "405 Method Not Allowed", b"use GET\n"
        elif path != "/metrics":
            status, body = "404 Not Found", b"metrics are at /metrics\n"
        else:
            status, body = "200 OK", await self._render()
        head = (
            f"HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + (b"" if method == "HEAD" else body))
        await writer.drain()
        return keep_alive


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS):
        line = (await reader.readline()).decode("latin-1").strip()
        if not line:
            return headers
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    raise ValueError("too many headers")


def _keep_alive(version: str, connection: str) -> bool:
    tokens = {t.strip().lower() for t in connection.split(",")}
    if version == "HTTP/1.0":
        return "keep-alive" in tokens
    return "close" not in tokens
