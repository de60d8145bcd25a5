"""A worker killed with SIGKILL mid-model-call or mid-tool-call loses and duplicates nothing.

Workers run as real `weft worker` subprocesses; the test kills one and starts a fresh one.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path

import yaml
from support import idle_after, start_thread, wait_until

from activities.store import Store

DEFINITIONS = Path(__file__).parent / "crash_definitions"


class WorkerProcess:
    """`weft worker` in a subprocess with its own config file."""

    def __init__(self, config_file: Path) -> None:
        self._config_file = config_file
        self.process: asyncio.subprocess.Process | None = None

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
        await self._drain

    async def stop(self) -> None:
        """SIGTERM and wait."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(self.process.wait(), 30)
            await self._drain


def _config(tmp_path: Path, address: str) -> Path:
    task_queue = f"crash-{uuid.uuid4().hex[:8]}"
    config = {
        "temporal": {"address": address, "taskQueue": task_queue},
        "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
        "definitions": str(DEFINITIONS),
        "providers": {"scripted": {"kind": "scripted", "scripts": str(DEFINITIONS / "scripts")}},
    }
    path = tmp_path / "weft.yml"
    path.write_text(yaml.safe_dump(config))
    return path


async def _until_event(store: Store, thread_id: str, event_type: str) -> None:
    for _ in range(600):
        if store.read_events(thread_id, types=[event_type]):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {event_type} event for {thread_id}")


async def _kill_and_recover(tmp_path, dev_server, temporal_client, message: str, kill_on: str):
    config_file = _config(tmp_path, dev_server.address)
    task_queue = yaml.safe_load(config_file.read_text())["temporal"]["taskQueue"]
    first, second = WorkerProcess(config_file), WorkerProcess(config_file)
    await first.start()
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    try:
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="crash_agent",
            options={"heartbeatTimeoutSeconds": 2},
            messages=[{"role": "user", "content": message}],
        )
        await _until_event(store, handle.id, kill_on)
        await first.kill()
        await second.start()
        await wait_until(handle, idle_after(1), timeout=90)
        messages = store.list_messages(handle.id)
        events = store.read_events(handle.id, limit=10_000)
        return handle, messages, events, store
    finally:
        await first.stop()
        await second.stop()


def _assert_no_duplicates(messages):
    assert len({m.id for m in messages}) == len(messages)
    assert len({m.position for m in messages}) == len(messages)


async def test_sigkill_during_model_call(tmp_path, dev_server, temporal_client):
    """Killed mid-stream, the model call is retried on a fresh worker; one reply is stored."""
    handle, messages, events, store = await _kill_and_recover(
        tmp_path, dev_server, temporal_client, "slow model please", kill_on="model.delta"
    )
    try:
        _assert_no_duplicates(messages)
        assert [m.role for m in messages] == ["user", "assistant"]
        assert messages[1].content.startswith("This reply streams slowly")
        resets = [e for e in events if e.type == "model.requested" and e.payload["reset"]]
        assert resets, "the retry did not announce an attempt reset"
    finally:
        store.close()
        await handle.signal("terminate", {})


async def test_sigkill_during_tool_call(tmp_path, dev_server, temporal_client):
    """Killed mid-tool, the tool is retried on a fresh worker; its result is stored once."""
    handle, messages, events, store = await _kill_and_recover(
        tmp_path, dev_server, temporal_client, "slow tool please", kill_on="tool.started"
    )
    try:
        _assert_no_duplicates(messages)
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[2].tool_status == "success"
        assert messages[3].content == "The note is stored."
        started = [e for e in events if e.type == "tool.started"]
        assert [e.payload["attempt"] for e in started] == [1, 2]
        # The killed attempt never finished the tool body, so the effect happened once.
        assert store.get_value(handle.id, "runs") == 1
    finally:
        store.close()
        await handle.signal("terminate", {})
