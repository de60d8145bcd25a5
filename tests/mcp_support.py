"""Real MCP servers for tests: the stdio script, an HTTP server subprocess, definitions.

`tools_server.py` (tests/mcp_servers/) has the tools every MCP test uses: add, echo, fail,
slow, pid, env, cwd, header, weather (structured), picture (image + resource), ask_name
(elicitation), add_tool (list_changed) and broken (`--bad-schema` makes its schema
`{"type": 5}`); `--mode hang` never answers `initialize`, `--mode exit` exits at once; mcp_servers/babbler.py
answers with what is not JSON-RPC.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from weft.contract.mcp import McpServerDef

SERVER_SCRIPT = Path(__file__).resolve().parent / "mcp_servers" / "tools_server.py"
HTTP_PATH = "/mcp"


def stdio_server(
    name: str = "tools",
    *,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    **fields: Any,
) -> McpServerDef:
    """A stdio definition of the test server (`command: python`: the worker's interpreter)."""
    return McpServerDef(
        name=name,
        command="python",
        args=[str(SERVER_SCRIPT), *args],
        env=env or {},
        **fields,
    )


def http_server_def(
    url: str, name: str = "tools_http", *, headers: dict[str, str] | None = None, **fields: Any
) -> McpServerDef:
    """A streamable HTTP definition for a server at `url`."""
    return McpServerDef(name=name, url=url, headers=headers or {}, **fields)


def write_server(definitions: Path, server: McpServerDef) -> Path:
    """Write `server` as `mcp/<name>.yaml` under a definitions folder; its path."""
    path = definitions / "mcp" / f"{server.name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = server.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    data.pop("name", None)  # the file's stem names it
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class HttpMcpServer:
    """The test server over streamable HTTP in a subprocess on 127.0.0.1:`port`."""

    def __init__(self, port: int, args: Sequence[str] = ()) -> None:
        self.port = port
        self.args = list(args)
        self.url = f"http://127.0.0.1:{port}{HTTP_PATH}"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def start(self, timeout: float = 15.0) -> None:
        """Start it and wait until it accepts connections."""
        command = [sys.executable, str(SERVER_SCRIPT), "--http", "--port", str(self.port)]
        self._process = subprocess.Popen([*command, *self.args], stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"the MCP test server exited: {self._process.returncode}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the MCP test server did not listen on {self.port} in {timeout} s")

    def stop(self, *, kill: bool = False) -> None:
        """Stop it (SIGKILL when `kill`, as a crash) and reap it."""
        process, self._process = self._process, None
        if process is None:
            return
        if kill:
            process.kill()
        else:
            process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def restart(self) -> None:
        self.stop()
        self.start()


@contextlib.contextmanager
def http_server(*, port: int | None = None, args: Sequence[str] = ()) -> Iterator[HttpMcpServer]:
    """The test server over streamable HTTP on a free port (or `port`) until the block ends."""
    server = HttpMcpServer(port or free_port(), args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def process_gone(pid: int) -> bool:
    """Whether `pid` has exited and been reaped (a zombie is not gone)."""
    return not Path(f"/proc/{pid}").exists()


def wait_gone(pid: int, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process_gone(pid):
            return True
        time.sleep(0.05)
    return process_gone(pid)


def server_children() -> list[tuple[int, str]]:
    """This process's children running the test server over stdio: (pid, state)."""
    found: list[tuple[int, str]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        args = [part.decode(errors="replace") for part in cmdline]
        if int(ppid) == os.getpid() and str(SERVER_SCRIPT) in args and "--http" not in args:
            found.append((int(entry.name), state))
    return found
