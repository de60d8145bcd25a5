"""A closed thread with a secret env, a KV value and a file, for the bundle tests."""

from __future__ import annotations

import asyncio

from support import (
    StartWorker,
    add_script,
    agent_definitions,
    idle_after,
    start_thread,
    store_of,
    wait_until,
)
from temporalio.client import Client

from weft.client.threads import Threads
from weft.workers.agent_worker import AgentWorker
from weft.workers.scripted_model import ScriptedModelServer

# Quotes and a backslash: its JSON spelling differs from its raw one.
SECRET = 'sk-"live"\\7f3a9c1e5b2d'
AGENT_SECRET = "org-key-2b8e61d0c4"  # in the agent definition's env, so in its snapshot


async def closed_thread(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> tuple[AgentWorker, str]:
    """A thread that noted a value, wrote a file, was terminated and closed."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "bundled"}}]},
                {"text": "noted"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script, env={"ORG_KEY": AGENT_SECRET}))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "note it"}],
        env={"API_TOKEN": SECRET, "CITY": {"value": "Oslo", "type": "text"}},
    )
    await wait_until(handle, idle_after(1))
    store_of(worker).files.write_file(handle.id, "/notes/report.txt", b"bytes of the report")
    await Threads(temporal_client).terminate(handle.id, "done")
    await asyncio.wait_for(handle.result(), timeout=60)
    return worker, handle.id
