"""Serving the gateway with uvicorn, with TCP_NODELAY on every connection."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

GRACEFUL_SHUTDOWN_SECONDS = 5


class NoDelayH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with Nagle's algorithm off for each accepted connection.

    asyncio's selector transports already set TCP_NODELAY; setting it here keeps our rule
    true whatever event loop or transport runs the server.
    """

    # uvicorn's H11Protocol narrows asyncio's `BaseTransport` to `Transport` (with its own
    # ignore); this override keeps uvicorn's signature, so it inherits that mismatch.
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


class _Server(uvicorn.Server):
    """uvicorn's server, leaving signals to its host (`weft serve` stops it with `stop()`).

    uvicorn's own handling re-raises SIGTERM after a graceful stop, so the process would
    end killed by the signal instead of with status 0.
    """

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class GatewayServer:
    """uvicorn around an ASGI app: `async with server:` serves until `stop()`.

    `port=0` picks a free port; `url` gives the bound address once started.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 8088) -> None:
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            http=NoDelayH11Protocol,
            lifespan="off",
            log_config=None,  # leave logging to the host process
            access_log=False,  # paths and bodies stay out of logs
            server_header=False,
            # Event streams never finish on their own: a stop waits this long for open
            # requests, then closes the rest (SSE clients resume with Last-Event-ID).
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
        )
        self.server: uvicorn.Server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The base URL the server listens on (after it started)."""
        if not self.server.started:
            raise RuntimeError("the gateway has not started")
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port}"

    async def _serve(self) -> None:
        try:
            await self.server.serve()
        except SystemExit:
            # uvicorn exits the process when it cannot bind; here that is an error to report.
            config = self.server.config
            raise RuntimeError(
                f"the gateway could not listen on {config.host}:{config.port}"
            ) from None

    def stop(self) -> None:
        """Ask the server to finish open requests and stop."""
        self.server.should_exit = True

    async def wait(self) -> None:
        """Block until the server stops."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def __aenter__(self) -> GatewayServer:
        self._task = asyncio.create_task(self._serve())
        while not self.server.started:
            if self._task.done():
                self._task.result()  # the bind failed: raise why
                raise RuntimeError("the gateway stopped before it started")
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._task is not None:
            await self._task
