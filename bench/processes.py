"""Worker subprocesses and CPU accounting for the load benchmark (Linux: reads /proc).

A worker in its own process has its CPU measured alone, apart from the bench process
(scripted model server and client) and the Temporal dev server.
"""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


class WorkerSubprocess:
    """A worker command that prints a line containing "polling" once it polls."""

    def __init__(self, *command: str) -> None:
        self._command = command
        self.process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None
        self._tail: list[str] = []

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self) -> None:
        """Start the worker and wait until it polls."""
        self.process = await asyncio.create_subprocess_exec(
            *self._command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), 120)
            if not line:
                raise RuntimeError(f"{self._command[0]} exited before polling: {self.output()}")
            self._keep(line)
            if b"polling" in line:
                break
        self._drain = asyncio.create_task(self._read_rest())

    async def _read_rest(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self._keep(line)

    def _keep(self, line: bytes) -> None:
        # The last lines only: enough to say why a worker failed, bounded under load.
        self._tail = [*self._tail[-40:], line.decode(errors="replace").rstrip()]

    def output(self) -> str:
        """The worker's last output lines."""
        return "\n".join(self._tail)

    async def stop(self) -> None:
        """SIGTERM, and wait for it to exit."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 60)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        if self._drain is not None:
            await self._drain


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used so far."""
    return cpu_seconds_of_stat(Path(f"/proc/{pid}/stat").read_text())


def cpu_seconds_of_stat(stat: str, *, with_children: bool = False) -> float:
    """User + system CPU seconds from the text of a /proc/<pid>/stat file; with the
    children it has waited for (cutime + cstime) when `with_children`."""
    # The command name may hold spaces and parentheses: fields start after the last ")".
    fields = stat[stat.rindex(")") + 2 :].split()
    ticks = int(fields[11]) + int(fields[12])
    if with_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / _TICK


@dataclass
class MachineCpu:
    """The machine's busy and total CPU seconds, all cores (from /proc/stat)."""

    busy: float
    total: float

    @classmethod
    def now(cls) -> MachineCpu:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        idle = values[3] + values[4]  # idle + iowait
        total = sum(values[:8])  # guest time is already counted in user
        return cls(busy=(total - idle) / _TICK, total=total / _TICK)


def peak_rss_mib(pid: int) -> float | None:
    """The most memory a live process has had resident so far (the kernel's VmHWM), in
    MiB; None once it has exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    return None


def temporal_server_pid(address: str) -> int | None:
    """The pid of the `temporal server start-dev` listening on `address`, if found."""
    port = address.rsplit(":", 1)[-1]
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"start-dev" in argv and any(
            a == b"--port" and b == port.encode() for a, b in zip(argv, argv[1:], strict=False)
        ):
            return int(entry.name)
    return None


def cpu_of_named(name: str) -> float:
    """CPU seconds so far of every process whose command name is `name`, with the CPU of
    their children that have exited (PostgreSQL runs one process per connection, all named
    "postgres", and a connection pool opens and closes some while it runs)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.index("(") + 1 : stat.rindex(")")] == name:
            total += cpu_seconds_of_stat(stat, with_children=True)
    return total
