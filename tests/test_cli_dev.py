"""`weft dev` starts the bundled dev server only when nothing listens, and stops only that."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from pathlib import Path

import pytest
import yaml
from support import idle_after, start_thread, wait_until

from weft.transport.connection import connect
from weft.workers.config import DevServerConfig
from weft.workers.dev_server import DevServer, DevServerError, free_port, is_listening

DEFINITIONS = Path(__file__).parent / "crash_definitions"


def _config(tmp_path: Path, address: str) -> Path:
    path = tmp_path / "dev.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {
                    "address": address,
                    "taskQueue": "dev-agents",
                    "devServer": {
                        "uiPort": free_port(),
                        "dbFile": str(tmp_path / "temporal.db"),
                        "searchAttributes": {
                            k: "Keyword"
                            for k in ("WeftAgent", "WeftStatus", "WeftParentThread", "WeftSession")
                        },
                        "dynamicConfig": {"history.transferProcessorMaxPollRPS": 10000},
                    },
                },
                "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
                "definitions": str(DEFINITIONS),
                "providers": {
                    "scripted": {"kind": "scripted", "scripts": str(DEFINITIONS / "scripts")}
                },
            }
        )
    )
    return path


async def _start_dev(config: Path) -> tuple[asyncio.subprocess.Process, str]:
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        "dev",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    banner = (await asyncio.wait_for(process.stdout.readline(), 90)).decode()
    return process, banner


async def _interrupt(process: asyncio.subprocess.Process) -> int:
    process.send_signal(signal.SIGINT)
    assert process.stdout is not None
    await asyncio.wait_for(process.stdout.read(), 60)
    return await asyncio.wait_for(process.wait(), 60)


async def test_weft_dev_starts_and_stops_its_own_server(tmp_path):
    """With nothing listening, `weft dev` starts a server, serves threads, and Ctrl-C stops it."""
    address = f"127.0.0.1:{free_port()}"
    process, banner = await _start_dev(_config(tmp_path, address))
    try:
        assert "started here" in banner, banner
        client = await connect(address)
        handle = await start_thread(
            client,
            "dev-agents",
            agent="crash_agent",
            messages=[{"role": "user", "content": "hello"}],
        )
        state = await wait_until(handle, lambda s: s.status == "waiting_input")
        assert state.agent == "crash_agent"
    finally:
        code = await _interrupt(process)
    assert code == 0
    assert not is_listening(address), "the dev server outlived `weft dev`"


async def test_weft_dev_reuses_a_running_server(tmp_path, dev_server, temporal_client):
    """With a server already listening, `weft dev` only adds a worker and leaves it running."""
    process, banner = await _start_dev(_config(tmp_path, dev_server.address))
    try:
        assert "already running" in banner, banner
        handle = await start_thread(
            temporal_client,
            "dev-agents",
            agent="crash_agent",
            messages=[{"role": "user", "content": "slow tool please"}],
        )
        await wait_until(handle, idle_after(1), timeout=60)
    finally:
        code = await _interrupt(process)
        await temporal_client.get_workflow_handle(handle.id).signal("terminate", {})
    assert code == 0 and is_listening(dev_server.address)


async def test_a_dev_server_that_cannot_start_says_why_at_once(tmp_path):
    """A server that exits while starting (here: its HTTP port is taken) is reported with
    its own last words, without waiting out the start timeout."""
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    http_port = taken.getsockname()[1]
    config = DevServerConfig(ui_port=free_port(), db_file=None)
    server = DevServer(config, address=f"127.0.0.1:{free_port()}", persistent=False, ui=False)
    server.command = lambda: [*DevServer.command(server), "--http-port", str(http_port)]
    started = asyncio.get_running_loop().time()
    try:
        with pytest.raises(DevServerError) as refused:
            await server.start(timeout=60)
    finally:
        taken.close()
        await server.stop()
    assert "exited with" in str(refused.value) and "address already in use" in str(refused.value)
    assert asyncio.get_running_loop().time() - started < 30
