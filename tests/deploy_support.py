"""Workers of two builds in one worker deployment, as real subprocesses (tests/test_deploys.py)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from weft.client.deploys import DeployError, Deploys

DEFINITIONS = Path(__file__).parent / "deploy_definitions"
V2_SCRIPT = Path(__file__).parent / "deploy_worker_v2.py"


def deploy_config(tmp_path: Path, address: str, store_url: str) -> Path:
    """A config file for versioned `weft worker`s on the deploy definitions: its own task
    queue and deployment name."""
    config = {
        "temporal": {"address": address, "taskQueue": f"deploy-{uuid.uuid4().hex[:8]}"},
        "deployment": {"name": f"weft-{uuid.uuid4().hex[:8]}"},
        "store": {"url": store_url},
        "definitions": str(DEFINITIONS),
        "providers": {"scripted": {"kind": "scripted", "scripts": str(DEFINITIONS / "scripts")}},
    }
    path = tmp_path / "weft.yml"
    path.write_text(yaml.safe_dump(config))
    return path


class BuildWorker:
    """`weft worker --build-id BUILD` in a subprocess; `v2=True` runs the v2 build's code."""

    def __init__(self, config_file: Path, build_id: str, *, v2: bool = False) -> None:
        weft = [str(Path(sys.executable).parent / "weft")]
        self._argv = [sys.executable, str(V2_SCRIPT)] if v2 else weft
        self._argv += ["--config", str(config_file), "worker", "--build-id", build_id]
        self.build_id = build_id
        self.process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the worker and wait until it says it polls as its version."""
        self.process = await asyncio.create_subprocess_exec(
            *self._argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 60)
        assert b"polling" in line and f".{self.build_id}".encode() in line, line
        self._drain = asyncio.create_task(self._discard_output())

    async def _discard_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while await self.process.stdout.read(65536):
            pass

    async def stop(self) -> None:
        """SIGTERM and wait."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.process.wait(), 30)
            if self._drain is not None:
                await self._drain


async def promote_when_known(deploys: Deploys, build_id: str, timeout: float = 30.0) -> None:
    """Promote `build_id` once Temporal knows the version (its worker's first poll)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        try:
            await deploys.promote(build_id)
            return
        except DeployError:
            if asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.2)


async def poll(check: Any, what: str, timeout: float) -> Any:
    """Await `check()` until it is truthy (and return it), or fail naming `what`."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (found := await check()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.5)
    return found
