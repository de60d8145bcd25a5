"""`weft worker` as a real subprocess, for drills that kill, stop and restart workers."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import yaml

from weft.store import Store

DEFINITIONS = Path(__file__).parent / "crash_definitions"


class WorkerProcess:
    """`weft worker` in a subprocess with its own config file."""

    def __init__(self, config_file: Path) -> None:
        self._config_file = config_file
        self.process: asyncio.subprocess.Process | None = None
        self._drain: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the worker and wait until it polls."""
        weft = Path(sys.executable).parent / "weft"
        self.process = await asyncio.create_subprocess_exec(
            str(weft),
            "--config",
            str(self._config_file),
            "worker",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 60)
        assert b"polling" in line, line
        self._drain = asyncio.create_task(self._discard_output())

    async def _discard_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        while await self.process.stdout.read(65536):
            pass

    async def kill(self) -> None:
        """SIGKILL: no graceful shutdown, no chance to report anything."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        await self.process.wait()
        if self._drain is not None:
            await self._drain

    async def stop(self) -> None:
        """SIGTERM and wait."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.process.wait(), 30)
            if self._drain is not None:  # None when start() failed before polling
                await self._drain


def worker_config(tmp_path: Path, address: str, *, store_url: str | None = None) -> Path:
    """A config file for `weft worker` on the crash definitions, with its own task queue."""
    task_queue = f"crash-{uuid.uuid4().hex[:8]}"
    config = {
        "temporal": {"address": address, "taskQueue": task_queue},
        "store": {"url": store_url or f"sqlite:///{tmp_path / 'weft.db'}"},
        "definitions": str(DEFINITIONS),
        "providers": {"scripted": {"kind": "scripted", "scripts": str(DEFINITIONS / "scripts")}},
    }
    path = tmp_path / "weft.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@asynccontextmanager
async def crash_drill(
    config_file: Path,
) -> AsyncIterator[tuple[str, WorkerProcess, WorkerProcess, Store]]:
    """(task queue, a running worker, a second one to start after the first dies, the
    store they share) for `config_file`; both workers are stopped afterwards."""
    config = yaml.safe_load(config_file.read_text())
    first, second = WorkerProcess(config_file), WorkerProcess(config_file)
    await first.start()
    store = Store.open(config["store"]["url"])
    try:
        yield config["temporal"]["taskQueue"], first, second, store
    finally:
        store.close()
        await first.stop()
        await second.stop()


async def until_event(store: Store, thread_id: str, event_type: str) -> None:
    """Wait until the store holds an event of `event_type` for the thread."""
    for _ in range(600):
        if store.events.read(thread_id, types=[event_type]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {event_type} event for {thread_id}")
