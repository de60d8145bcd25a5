"""`weft dev` starts the bundled dev server only when nothing listens, and stops only that."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml
from support import idle_after, start_thread, wait_until

from weft.transport.connection import connect
from weft.workers.config import DevServerConfig, load_config
from weft.workers.demo import defaults
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
    # This one server's command line gains a flag; the class's stays as it is.
    server.command = lambda: [*DevServer.command(server), "--http-port", str(http_port)]  # type: ignore[method-assign]
    started = asyncio.get_running_loop().time()
    try:
        with pytest.raises(DevServerError) as refused:
            await server.start(timeout=60)
    finally:
        taken.close()
        await server.stop()
    assert "exited with" in str(refused.value) and "address already in use" in str(refused.value)
    assert asyncio.get_running_loop().time() - started < 30


def _outside_env(**extra: str) -> dict[str, str]:
    """The environment of a user outside the checkout: no weft settings of ours."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WEFT_", "OPENAI_"))}
    return {**env, **extra}


async def test_weft_dev_runs_the_demo_from_any_folder(tmp_path, dev_server, temporal_client):
    """From a folder with no config and no definitions, `weft dev` serves the demo's agents
    with the scripted model, found in the installed package, and says how to use one's own."""
    queue = f"dev-{uuid.uuid4().hex[:8]}"
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "dev",
        cwd=tmp_path,
        env=_outside_env(WEFT_TEMPORAL_ADDRESS=dev_server.address, WEFT_TASK_QUEUE=queue),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    lines: list[str] = []
    try:
        while not lines or "worker running" not in lines[-1]:
            line = (await asyncio.wait_for(process.stdout.readline(), 90)).decode()
            assert line, "".join(lines)
            lines.append(line)
        assert "--definitions DIR or WEFT_DEFINITIONS=DIR" in "".join(lines)
        handle = await start_thread(
            temporal_client,
            queue,
            agent="travel_assistant",
            messages=[{"role": "user", "content": "What's the weather in Paris?"}],
        )
        state = await wait_until(handle, idle_after(1), timeout=60)
        assert state.last_outcome == "Paris: light rain, 14 °C. Tokyo: clear, 22 °C."
    finally:
        code = await _interrupt(process)
    assert code == 0
    assert (tmp_path / ".weft" / "weft.db").exists(), "the store belongs in the user's folder"


def test_own_definitions_that_are_missing_say_how_to_point_at_them(tmp_path):
    """`weft worker --definitions mine` where there is no `mine` exits 1 with one line that
    names the folder and both ways to point at one's own definitions."""
    done = subprocess.run(
        [str(Path(sys.executable).parent / "weft"), "worker", "--definitions", "mine"],
        cwd=tmp_path,
        env=_outside_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert str(tmp_path / "mine") in line and "does not exist" in line, line
    assert "--definitions DIR" in line and "WEFT_DEFINITIONS=DIR" in line, line


def test_a_copy_of_the_checkouts_config_finds_the_demo_in_the_package(tmp_path):
    """temporal-dev.yml copied into another folder keeps working: its checkout-relative demo
    definitions and scripts resolve to the installed package's."""
    copy = tmp_path / "temporal-dev.yml"
    copy.write_text((Path(__file__).resolve().parents[1] / "temporal-dev.yml").read_text())
    config = defaults.with_demo_defaults(load_config(copy, environ={}))
    assert Path(config.definitions) == defaults.DEFINITIONS
    assert Path(config.providers["scripted"].scripts or "") == defaults.SCRIPTS
    assert config.store_url() == f"sqlite:///{tmp_path / '.weft' / 'weft.db'}"
