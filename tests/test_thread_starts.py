"""`start_confirmed`: the worker's verdict on a new thread reaches the caller."""

from __future__ import annotations

import pytest
from support import add_script, agent_definitions
from temporalio.client import WorkflowExecutionStatus

from weft.client.starts import ThreadStartRefused, start_confirmed
from weft.client.threads import Threads


async def test_a_known_agent_is_confirmed(temporal_client, start_worker, scripted_server):
    script = add_script(scripted_server, {"turns": [{"replies": [{"text": "hi"}]}]})
    worker = await start_worker(agent_definitions(script))
    threads = Threads(temporal_client, task_queue=worker.task_queue)
    started = await start_confirmed(threads, "helper", messages=["hello"])
    assert started.confirmed
    assert (await started.handle.describe()).status == WorkflowExecutionStatus.RUNNING
    await threads.terminate(started.thread_id)


async def test_an_unknown_agent_is_refused_with_the_reason(
    temporal_client, start_worker, scripted_server
):
    script = add_script(scripted_server, {"turns": [{"replies": [{"text": "hi"}]}]})
    worker = await start_worker(agent_definitions(script))
    threads = Threads(temporal_client, task_queue=worker.task_queue)
    with pytest.raises(ThreadStartRefused, match="unknown agent; known agents: helper") as err:
        await start_confirmed(threads, "nobody")
    handle = temporal_client.get_workflow_handle(err.value.thread_id)
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED


async def test_without_a_worker_the_start_is_unconfirmed(temporal_client):
    threads = Threads(temporal_client, task_queue="no-worker-polls-this")
    started = await start_confirmed(threads, "helper", timeout=0.5)
    assert not started.confirmed
    await started.handle.terminate()
