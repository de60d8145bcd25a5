"""`weft dev` started in the background (`nohup weft dev &`) stops everything it started on
SIGTERM, SIGINT or SIGHUP, even while it is still starting: no orphan, ports free."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from weft.workers.dev_server import free_port, is_listening

WEFT = Path(sys.executable).parent / "weft"
DEMO = Path(__file__).resolve().parents[1] / "workers" / "demo"


def _hangup_by_default() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


class Dev:
    """One `weft dev` process started by a shell, as a user's terminal would."""

    def __init__(self, tmp_path: Path, *, nohup: bool) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        self.ui = f"127.0.0.1:{free_port()}"
        self.log = tmp_path / "dev.log"
        config = tmp_path / "temporal-dev.yml"
        config.write_text(
            yaml.safe_dump(
                {
                    "temporal": {
                        "address": self.address,
                        "devServer": {"uiPort": int(self.ui.rpartition(":")[2])},
                    },
                    "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
                    "definitions": str(DEMO / "definitions"),
                    "providers": {
                        "scripted": {"kind": "scripted", "scripts": str(DEMO / "scripts")}
                    },
                }
            )
        )
        # `sh -c 'cmd &'` is how a script or `nohup … &` starts it: a background job of a
        # non-interactive shell, SIGINT ignored, SIGHUP too under nohup.
        prefix = "nohup " if nohup else ""
        line = f"{prefix}'{WEFT}' --config '{config}' dev > '{self.log}' 2>&1 & echo $!"
        shell = subprocess.run(
            ["sh", "-c", line],
            capture_output=True,
            text=True,
            check=True,
            # A terminal's shell has SIGHUP at its default even when this test runs under
            # `nohup` (which weft dev rightly keeps ignoring): set it as a terminal would.
            preexec_fn=None if nohup else _hangup_by_default,
        )
        self.pid = int(shell.stdout.strip())

    def children(self) -> list[int]:
        """The processes whose parent is `weft dev`."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == self.pid:
                found.append(int(stat.parent.name))
        return found

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone: it holds no ports and does nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


async def until(fact: Callable[[], object], what: str, timeout: float = 60) -> None:
    """Wait, bounded, until `fact()` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not fact():
        if loop.time() > deadline:
            raise AssertionError(f"{what} within {timeout:.0f} s")
        await asyncio.sleep(0.05)


async def stopped_cleanly(dev: Dev, server: list[int]) -> None:
    """Wait until `weft dev`, the server it started and both ports are gone."""
    try:
        try:
            await until(lambda: not alive(dev.pid), "weft dev did not exit")
        except AssertionError as err:
            # What it printed says which stop it was stuck in (worker, server).
            raise AssertionError(f"{err}; its output:\n{dev.output()[-3000:]}") from None
        await until(lambda: not any(alive(p) for p in server), "the dev server outlived weft dev")
        await until(lambda: not is_listening(dev.address), "the frontend port stayed taken")
        await until(lambda: not is_listening(dev.ui), "the UI port stayed taken")
    finally:
        for pid in [dev.pid, *server]:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
async def test_a_signal_while_starting_stops_the_server_it_started(tmp_path, sig):
    """Under `nohup weft dev &`, a SIGTERM or SIGINT that arrives while the dev server is
    starting stops that server too, and frees its ports."""
    dev = Dev(tmp_path, nohup=True)
    server: list[int] = []
    try:
        await until(lambda: bool(dev.children()), "weft dev started no dev server", 90)
        server = dev.children()
        assert "worker running" not in dev.output(), "too late: the stack was already up"
        os.kill(dev.pid, sig)
    finally:
        await stopped_cleanly(dev, server)


async def test_sighup_after_start_stops_everything(tmp_path):
    """`weft dev &` in a terminal that closes (SIGHUP) stops the worker and its dev server."""
    dev = Dev(tmp_path, nohup=False)
    server: list[int] = []
    try:
        await until(lambda: "worker running" in dev.output(), "weft dev never ran", 90)
        server = dev.children()
        assert server and is_listening(dev.address) and is_listening(dev.ui)
        os.kill(dev.pid, signal.SIGHUP)
    finally:
        await stopped_cleanly(dev, server)
