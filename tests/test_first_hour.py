"""Issue #34, the first hour: an unknown agent reaches the caller (and the worker's console)
as one clear message, thread ids are readable, and a missing provider says how to add one."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import uuid
from pathlib import Path

import pytest
from support import add_script, agent_definitions
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from worker_process import worker_config

import weft
from weft.client.starts import start_confirmed
from weft.client.thread_ids import new_thread_id
from weft.client.threads import Threads
from weft.definitions import Definitions
from weft.workers.config import load_config
from weft.workers.scripted_model import ScriptedModelServer

SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@=+\-]{0,199}$")  # the HTTP API's pattern


def _worker(
    client: Client,
    definitions: Definitions,
    tmp_path: Path,
    scripted_server: ScriptedModelServer,
) -> weft.Worker:
    """A weft.Worker on its own task queue and store, the scripted server as `scripted`."""
    return weft.Worker(
        client,
        definitions,
        store=f"sqlite:///{tmp_path / 'weft.db'}",
        providers={"scripted": {"kind": "openai", "baseUrl": scripted_server.openai_base_url}},
        task_queue=f"tq-{uuid.uuid4().hex[:12]}",
    )


def _names_the_mismatch(text: str, queue: str) -> None:
    assert "'nobody'" in text and "unknown agent" in text, text
    assert "known agents: helper" in text and repr(queue) in text, text
    assert "AcceptedUpdateCompletedWorkflow" not in text, text


async def test_start_of_an_unknown_agent_is_refused_naming_queue_and_agents(
    dev_server, scripted_server, tmp_path
):
    """`Thread.start` of an agent the worker does not define raises `ThreadStartRefused`
    naming the agent, the worker's agents and its task queue; the Temporal UI's failure
    says the same."""
    client = await weft.connect(dev_server.address)
    definitions = agent_definitions(add_script(scripted_server, {"replies": [{"text": "x"}]}))
    async with _worker(client, definitions, tmp_path, scripted_server) as running:
        with pytest.raises(weft.ThreadStartRefused) as refused:
            await weft.Thread.start(client, "nobody", task_queue=running.task_queue)
    _names_the_mismatch(str(refused.value), running.task_queue)
    handle = client.get_workflow_handle(refused.value.thread_id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    _names_the_mismatch(str(failure.value.cause), running.task_queue)  # the UI's message


async def test_ask_on_a_refused_thread_names_the_unknown_agent(
    dev_server, scripted_server, tmp_path
):
    """`ask` on a thread its worker refused raises `ThreadFailed` naming the agent, the
    worker's agents and task queue, not `AcceptedUpdateCompletedWorkflow`, whether it was
    sent before the refusal or after."""
    client = await weft.connect(dev_server.address)
    definitions = agent_definitions(add_script(scripted_server, {"replies": [{"text": "x"}]}))
    async with _worker(client, definitions, tmp_path, scripted_server) as running:
        # Not waiting for the verdict: the update races the refusal, as the README's did.
        thread = await weft.Thread.start(
            client, "nobody", task_queue=running.task_queue, accept_timeout=0
        )
        with pytest.raises(weft.ThreadFailed) as racing:
            await asyncio.wait_for(thread.ask("hello?"), 30)
        with pytest.raises(weft.ThreadFailed) as after:  # the workflow has failed by now
            await asyncio.wait_for(thread.ask("anyone?"), 30)
    for failed in (racing, after):
        assert failed.value.thread_id == thread.id
        _names_the_mismatch(str(failed.value), running.task_queue)


async def test_thread_ids_name_their_agent(dev_server, scripted_server, tmp_path):
    """A thread started without an id gets `<agent>-<12 hex>`; a given id is kept."""
    client = await weft.connect(dev_server.address)
    definitions = agent_definitions(add_script(scripted_server, {"replies": [{"text": "x"}]}))
    async with _worker(client, definitions, tmp_path, scripted_server) as running:
        thread = await weft.Thread.start(client, "helper", task_queue=running.task_queue)
        assert re.fullmatch(r"helper-[0-9a-f]{12}", thread.id), thread.id
        mine = f"mine-{uuid.uuid4().hex[:6]}"
        named = await weft.Thread.start(
            client, "helper", thread_id=mine, task_queue=running.task_queue
        )
        assert named.id == mine
        for started in (thread, named):
            await started.terminate()
    # The CLI and the HTTP API start threads through the same `Threads.start`.
    cli_started = await start_confirmed(
        Threads(client, task_queue="nobody-polls-this"), "helper", timeout=0
    )
    assert re.fullmatch(r"helper-[0-9a-f]{12}", cli_started.thread_id)
    await cli_started.handle.terminate()


def test_generated_ids_stay_valid_ids():
    """Generated ids match the HTTP API's id pattern whatever the agent's name."""
    for agent in ("helper", "travel_assistant", "_private", "a.b-c", "ünïcode", "-", "x" * 300):
        thread_id = new_thread_id(agent)
        assert SAFE_ID.fullmatch(thread_id), (agent, thread_id)
    assert new_thread_id("helper") != new_thread_id("helper")


async def test_no_provider_says_how_to_configure_one(dev_server, monkeypatch, tmp_path):
    """A model naming `openai` with no provider configured fails the worker's start naming
    the provider key, that none is configured, and the three ways to configure it."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "ANTHROPIC_")):
            monkeypatch.delenv(name)
    client = await weft.connect(dev_server.address)
    definitions = weft.Definitions().add(
        weft.define_model(name="gpt", provider="openai", model="gpt-4.1-mini"),
        weft.define_prompt(name="p", toolDescription="p", model="gpt", prompt="Hi."),
        weft.define_agent(name="helper", sideA={"prompt": "p"}),
    )
    worker = weft.Worker(client, definitions, store=f"sqlite:///{tmp_path / 'w.db'}")
    with pytest.raises(weft.DefinitionError) as err:
        async with worker:
            pass
    text = str(err.value)
    assert "provider 'openai'" in text and "no provider is configured" in text, text
    assert "OPENAI_BASE_URL" in text and "OPENAI_API_KEY" in text, text
    assert "providers=" in text and "temporal-dev.yml" in text, text


async def test_the_worker_console_shows_one_line_for_an_unknown_agent(dev_server, tmp_path):
    """`weft worker` prints one line naming the refused thread's agent, no traceback."""
    config_file = worker_config(tmp_path, dev_server.address)
    queue = load_config(config_file, environ={}).temporal.task_queue
    weft_bin = Path(sys.executable).parent / "weft"
    process = await asyncio.create_subprocess_exec(
        str(weft_bin),
        "--config",
        str(config_file),
        "worker",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), 60)
        assert b"polling" in line, line
        client = await weft.connect(dev_server.address)
        with pytest.raises(weft.ThreadStartRefused):
            await start_confirmed(Threads(client, task_queue=queue), "nobody", timeout=30)
        refused = await asyncio.wait_for(process.stdout.readline(), 30)
    finally:
        process.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(process.communicate(), 30)
    output = (refused + rest).decode()
    mentions = [line for line in output.splitlines() if "nobody" in line]
    assert len(mentions) == 1, output
    assert "refused" in mentions[0] and repr(queue) in mentions[0], output
    assert "Traceback" not in output and "Completing activity as failed" not in output, output
