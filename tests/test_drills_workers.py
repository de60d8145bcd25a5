"""Worker and server drills (reduced size) with real `weft worker` subprocesses:
two workers on PostgreSQL with one SIGKILLed, SIGTERM draining, a dev server restart."""

from __future__ import annotations

import asyncio

import yaml
from support import idle_after, start_thread, wait_until
from worker_process import WorkerProcess, until_event, worker_config

from weft.store import Store
from weft.transport.connection import connect
from weft.workers.config import DevServerConfig
from weft.workers.dev_server import DevServer, free_port
from weft.workers.search_attributes import ensure_search_attributes

SLOW_TOOL = [{"role": "user", "content": "slow tool please"}]


async def test_two_workers_on_postgres_survive_a_sigkill(
    tmp_path, dev_server, temporal_client, postgres_databases
):
    """Two workers share a queue and a PostgreSQL store; one is killed; every thread ends."""
    url = postgres_databases()
    config = worker_config(tmp_path, dev_server.address, store_url=url)
    queue = yaml.safe_load(config.read_text())["temporal"]["taskQueue"]
    workers = [WorkerProcess(config), WorkerProcess(config)]
    for worker in workers:
        await worker.start()
    store = Store.open(url)
    try:
        handles = [
            await start_thread(
                temporal_client,
                queue,
                agent="crash_agent",
                options={"heartbeatTimeoutSeconds": 2},
                messages=SLOW_TOOL,
            )
            for _ in range(6)
        ]
        for handle in handles:
            await until_event(store, handle.id, "tool.started")
        await workers[0].kill()
        for handle in handles:
            state = await wait_until(handle, idle_after(1), timeout=120)
            assert state.last_outcome == "The note is stored."
            roles = [m.role for m in store.messages.list(handle.id)]
            assert roles == ["user", "assistant", "tool", "assistant"]
    finally:
        store.close()
        for worker in workers:
            await worker.stop()


async def test_sigterm_drains_the_running_tool(tmp_path, dev_server, temporal_client):
    """SIGTERM lets the in-flight tool finish on the same attempt before the worker exits."""
    config = worker_config(tmp_path, dev_server.address)
    queue = yaml.safe_load(config.read_text())["temporal"]["taskQueue"]
    first, second = WorkerProcess(config), WorkerProcess(config)
    await first.start()
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    try:
        handle = await start_thread(temporal_client, queue, agent="crash_agent", messages=SLOW_TOOL)
        await until_event(store, handle.id, "tool.started")
        await first.stop()  # SIGTERM: graceful shutdown waits for the running activity
        await until_event(store, handle.id, "tool.result")
        await second.start()
        await wait_until(handle, idle_after(1), timeout=60)
        started = store.events.read(handle.id, types=["tool.started"])
        assert [e.payload["attempt"] for e in started] == [1]
        assert store.values.get(handle.id, "runs") == 1
    finally:
        store.close()
        await second.stop()


async def test_threads_survive_a_dev_server_restart(tmp_path):
    """The dev server (persistent file) restarts under 10 live threads; all of them finish."""
    address = f"127.0.0.1:{free_port()}"
    server_config = DevServerConfig(
        ui_port=free_port(),
        db_file=str(tmp_path / "temporal.db"),
        search_attributes={
            k: "Keyword" for k in ("WeftAgent", "WeftStatus", "WeftParentThread", "WeftSession")
        },
        dynamic_config={"history.transferProcessorMaxPollRPS": 10000},
    )
    server = DevServer(server_config, address=address, persistent=True, ui=False)
    await server.start()
    config = worker_config(tmp_path, address)
    queue = yaml.safe_load(config.read_text())["temporal"]["taskQueue"]
    worker = WorkerProcess(config)
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    try:
        client = await connect(address)
        await ensure_search_attributes(client, "default")
        await worker.start()
        handles = [
            await start_thread(
                client,
                queue,
                agent="crash_agent",
                options={"heartbeatTimeoutSeconds": 5},
                messages=SLOW_TOOL,
            )
            for _ in range(10)
        ]
        for handle in handles:
            await until_event(store, handle.id, "tool.started")
        await server.stop()
        await asyncio.sleep(1)
        await server.start()
        for handle in handles:
            state = await wait_until(handle, idle_after(1), timeout=120)
            assert state.last_outcome == "The note is stored."
            assert [m.role for m in store.messages.list(handle.id)] == [
                "user",
                "assistant",
                "tool",
                "assistant",
            ]
    finally:
        store.close()
        await worker.stop()
        await server.stop()
