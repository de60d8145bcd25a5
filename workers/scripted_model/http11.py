"""A minimal HTTP/1.1 server on asyncio streams: keep-alive, chunked streaming, fault hooks.

Only what the scripted model server needs. TCP_NODELAY is set on every accepted socket:
without it a keep-alive reply written in pieces waits ~40 ms for the peer's delayed ACK.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from urllib.parse import urlsplit

_MAX_HEADERS = 100


@dataclass
class Request:
    """A parsed request; header names are lower-case."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Response:
    """A whole body, or `events` sent as chunks with pacing and an optional mid-stream drop."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    events: list[bytes] | None = None
    delay_ms: int = 0
    chunk_delay_ms: int = 0
    # Close the connection after this many events, without the chunked terminator.
    drop_after: int | None = None


Handler = Callable[[Request], Awaitable[Response]]


class HttpServer:
    """Serves `handler` on host:port until `stop()`; port 0 picks a free port."""

    def __init__(self, handler: Handler, *, host: str, port: int) -> None:
        self._handler = handler
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._bound_port: int | None = None
        self.accepted = 0  # connections accepted so far; tests use it to check keep-alive

    @property
    def port(self) -> int:
        """The bound port (after `start()`; still answers after `stop()`)."""
        if self._bound_port is None:
            raise RuntimeError("server not started")
        return self._bound_port

    async def start(self) -> None:
        """Bind and begin accepting connections."""
        self._server = await asyncio.start_server(self._serve, self._host, self._port)
        self._bound_port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Stop accepting, cancel open connections (idle keep-alive ones too) and wait."""
        if self._server is None:
            return
        self._server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.accepted += 1
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                request = await _read_request(reader)
                if request is None:
                    break
                try:
                    response = await self._handler(request)
                except Exception as exc:  # a handler bug must not kill the connection loop silently
                    response = Response(
                        500, f"handler failed: {exc!r}".encode(), content_type="text/plain"
                    )
                keep_alive = request.headers.get("connection", "").lower() != "close"
                if not await _write(writer, response, keep_alive) or not keep_alive:
                    break
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            ValueError,
        ):
            pass  # a client that hangs up or sends garbage just loses its connection
        except asyncio.CancelledError:
            # Only stop() cancels these tasks. Ending normally matters on 3.11, where
            # asyncio's stream callback calls task.exception() on a cancelled task and logs it.
            pass
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await writer.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _version = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    for _ in range(_MAX_HEADERS):
        raw = await reader.readline()
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Request(method.upper(), urlsplit(target).path, headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).split(b";")[0].strip(), 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b"\n", b""):
                pass  # trailers
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _head(response: Response, keep_alive: bool, framing: str) -> bytes:
    try:
        reason = HTTPStatus(response.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [
        f"HTTP/1.1 {response.status} {reason}",
        f"content-type: {response.content_type}",
        framing,
    ]
    lines.append("connection: keep-alive" if keep_alive else "connection: close")
    lines += [f"{k}: {v}" for k, v in response.headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _write(writer: asyncio.StreamWriter, response: Response, keep_alive: bool) -> bool:
    """Send `response`; False means the connection must close (a drop was injected)."""
    if response.delay_ms:
        await asyncio.sleep(response.delay_ms / 1000)
    if response.events is None:
        writer.write(
            _head(response, keep_alive, f"content-length: {len(response.body)}") + response.body
        )
        await writer.drain()
        return True
    pending = _head(response, keep_alive, "transfer-encoding: chunked")
    for sent, event in enumerate(response.events):
        if response.drop_after is not None and sent >= response.drop_after:
            writer.write(pending)
            await writer.drain()
            return False
        pending += f"{len(event):x}\r\n".encode() + event + b"\r\n"
        if response.chunk_delay_ms:
            writer.write(pending)
            await writer.drain()
            pending = b""
            await asyncio.sleep(response.chunk_delay_ms / 1000)
    if response.drop_after is not None and response.drop_after >= len(response.events):
        writer.write(pending)
        await writer.drain()
        return False
    writer.write(pending + b"0\r\n\r\n")
    await writer.drain()
    return True
