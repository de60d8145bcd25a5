"""Search attributes at worker start, against real dev servers started WITHOUT them: the
worker registers them and a thread runs, or it refuses to poll (and `weft worker` exits
non-zero) listing the exact commands; either way no workflow task ever fails."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from support import add_script, agent_definitions, idle_after, scratch_config, wait_until
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle
from worker_process import WorkerProcess, worker_config

from weft.contract.thread import WORKFLOW_TYPE
from weft.store import Store
from weft.transport.connection import connect
from weft.workers.agent_worker import AgentWorker
from weft.workers.config import DevServerConfig
from weft.workers.dev_server import DevServer, find_temporal_binary, free_port
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.search_attributes import REQUIRED, SearchAttributesMissing

# The SQL visibility store of the dev server has ten Keyword slots: filling them makes the
# server itself refuse to register weft's attributes (a real refusal, not a mock).
FILLERS = {f"Filler{i}": "Keyword" for i in range(1, 11)}


@asynccontextmanager
async def bare_dev_server(search_attributes: dict[str, str]) -> AsyncIterator[DevServer]:
    """`temporal server start-dev` with only `search_attributes` (none of weft's)."""
    config = DevServerConfig(
        ui_port=free_port(),
        db_file=None,
        search_attributes=search_attributes,
        dynamic_config={"history.transferProcessorMaxPollRPS": 10000},
    )
    server = DevServer(config, address=f"127.0.0.1:{free_port()}", persistent=False, ui=False)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


async def custom_attributes(client: Client) -> dict[str, int]:
    """The namespace's custom search attributes and their types."""
    from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace="default")
    )
    return dict(listed.custom_attributes)


async def failed_workflow_tasks(handle: WorkflowHandle[object, object]) -> list[str]:
    """The causes of every WorkflowTaskFailed event in the thread's history."""
    history = await handle.fetch_history()
    return [
        str(event.workflow_task_failed_event_attributes.failure.message)
        for event in history.events
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
    ]


async def test_worker_registers_missing_attributes_and_a_thread_runs(tmp_path):
    """On a dev server without weft's attributes the worker registers them before polling,
    and a thread answers with no failed workflow task."""
    async with bare_dev_server({}) as dev, ScriptedModelServer() as scripted:
        client = await connect(dev.address)
        assert not set(REQUIRED) & set(await custom_attributes(client))
        script = add_script(scripted, {"replies": [{"text": "registered and running"}]})
        config = scratch_config(tmp_path)
        worker = AgentWorker(
            client,
            config,
            definitions=agent_definitions(script),
            task_queue=f"tq-{uuid.uuid4().hex[:8]}",
            scripted=scripted,
        )
        async with worker:
            assert set(REQUIRED) <= set(await custom_attributes(client))
            handle = await client.start_workflow(
                WORKFLOW_TYPE,
                {"agent": "helper", "messages": [{"role": "user", "content": "hi"}]},
                id=f"thread-{uuid.uuid4().hex[:12]}",
                task_queue=worker.task_queue,
            )
            state = await wait_until(handle, idle_after(1))
            assert state.stop_reason == "stop_on_response"
            assert worker.store is not None
            answer = worker.store.messages.list(handle.id)[-1]
            assert answer.content == "registered and running"
            assert await failed_workflow_tasks(handle) == []
            # The attribute really is usable: visibility finds the thread by its status.
            query = f"WeftStatus = 'waiting_input' AND WorkflowId = '{handle.id}'"
            for _ in range(100):
                if [w.id async for w in client.list_workflows(query)] == [handle.id]:
                    break
                await asyncio.sleep(0.1)  # visibility is eventually consistent
            else:
                raise AssertionError(f"visibility never listed {handle.id} by WeftStatus")


async def test_check_only_refuses_with_the_commands(tmp_path):
    """With registration off, a worker on a server lacking the attributes refuses to start
    and names every missing attribute with its create command."""
    async with bare_dev_server({}) as dev:
        client = await connect(dev.address)
        worker = AgentWorker(
            client,
            scratch_config(tmp_path),
            definitions=agent_definitions("unused"),
            task_queue=f"tq-{uuid.uuid4().hex[:8]}",
            register_search_attributes=False,
        )
        with pytest.raises(SearchAttributesMissing) as refused:
            await worker.__aenter__()
        assert refused.value.missing == sorted(REQUIRED)
        for name in REQUIRED:
            assert (
                f"temporal operator search-attribute create --address {dev.address}"
                f" --namespace default --name {name} --type Keyword"
            ) in str(refused.value)
        assert worker.worker is None  # it never polled
        assert not set(REQUIRED) & set(await custom_attributes(client))


async def run_weft_worker(config_file: Path) -> tuple[int, str]:
    """`weft worker` as a subprocess that is expected to exit by itself."""
    weft = Path(sys.executable).parent / "weft"
    process = await asyncio.create_subprocess_exec(
        str(weft),
        "--config",
        str(config_file),
        "worker",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode()


async def run_printed_command(line: str) -> None:
    """Run one command exactly as the worker printed it (with the bundled `temporal`)."""
    argv = shlex.split(line)
    assert argv[0] == "temporal", line
    process = await asyncio.create_subprocess_exec(
        find_temporal_binary(),
        *argv[1:],
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    assert process.returncode == 0, f"{line}: {out.decode()}"


async def test_weft_worker_exits_with_commands_that_fix_it(tmp_path):
    """When the server refuses to register them (no free Keyword slot, and WeftStatus taken
    as Text), `weft worker` exits 1 listing remove/create commands; run verbatim, they let
    a second worker run the waiting thread, whose history never had a failed task."""
    async with bare_dev_server({**FILLERS, "WeftStatus": "Text"}) as dev:
        client = await connect(dev.address)
        config_file = worker_config(tmp_path, dev.address)
        task_queue = config_file.read_text().split("taskQueue: ")[1].split()[0]
        # A thread started before any worker could run it: it must simply wait.
        handle = await client.start_workflow(
            WORKFLOW_TYPE,
            {"agent": "crash_agent", "messages": [{"role": "user", "content": "chat 1"}]},
            id=f"thread-{uuid.uuid4().hex[:12]}",
            task_queue=task_queue,
        )

        code, output = await run_weft_worker(config_file)
        assert code == 1, output
        assert "polling" not in output
        assert "not Keyword: WeftStatus is Text" in output
        assert "cannot have more than 10 search attribute of type Keyword" in output
        commands = [line.strip() for line in output.splitlines() if "temporal operator" in line]
        where = f"--address {dev.address} --namespace default"
        assert commands == [
            f"temporal operator search-attribute remove {where} --name WeftStatus --yes",
            *(
                f"temporal operator search-attribute create {where} --name {name} --type Keyword"
                for name in sorted(REQUIRED)
            ),
        ]

        # The operator frees a Keyword slot per weft attribute, then runs the printed
        # commands verbatim.
        for name in list(FILLERS)[: len(REQUIRED)]:
            await run_printed_command(
                f"temporal operator search-attribute remove {where} --name {name} --yes"
            )
        for line in commands:
            await run_printed_command(line)

        worker = WorkerProcess(config_file)
        await worker.start()
        try:
            state = await wait_until(handle, idle_after(1))
            assert state.status == "waiting_input"
        finally:
            await worker.stop()
        store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
        try:
            assert store.messages.list(handle.id)[-1].content == "chatting"
        finally:
            store.close()
        assert await failed_workflow_tasks(handle) == []
