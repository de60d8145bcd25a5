"""Host the scripted model server on its own event loop thread, for synchronous callers."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any

from weft.workers.scripted_model.server import ScriptedModelServer


class ThreadedServer:
    """A running server on a background thread; call `stop()` to shut it down."""

    def __init__(
        self,
        server: ScriptedModelServer,
        loop: asyncio.AbstractEventLoop,
        stopped: asyncio.Event,
        thread: threading.Thread,
    ) -> None:
        self.server = server
        self._loop = loop
        self._stopped = stopped
        self._thread = thread

    @property
    def openai_base_url(self) -> str:
        """See ScriptedModelServer.openai_base_url."""
        return self.server.openai_base_url

    @property
    def anthropic_base_url(self) -> str:
        """See ScriptedModelServer.anthropic_base_url."""
        return self.server.anthropic_base_url

    @property
    def base_url(self) -> str:
        """See ScriptedModelServer.base_url."""
        return self.server.base_url

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Recorded requests (thread-safe copy)."""
        return self.server.requests

    def set_script(self, name: str, script: Any) -> None:
        """Add or replace a script (thread-safe)."""
        self.server.set_script(name, script)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server and join its thread; calling it twice is harmless."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout)


def start_in_thread(
    scripts: dict[str, Any] | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> ThreadedServer:
    """Start a server on a daemon thread and return once it accepts connections."""
    server = ScriptedModelServer(scripts, host=host, port=port)  # validates scripts here
    ready: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = (
        concurrent.futures.Future()
    )

    async def main() -> None:
        stopped = asyncio.Event()
        try:
            await server.start()
        except BaseException as exc:
            ready.set_exception(exc)
            raise
        ready.set_result((asyncio.get_running_loop(), stopped))
        try:
            await stopped.wait()
        finally:
            await server.stop()

    def run() -> None:
        try:
            asyncio.run(main())
        except Exception:
            pass  # already reported to the starter through `ready`

    thread = threading.Thread(target=run, name="scripted-model-server", daemon=True)
    thread.start()
    loop, stopped = ready.result(timeout=10)
    return ThreadedServer(server, loop, stopped, thread)
