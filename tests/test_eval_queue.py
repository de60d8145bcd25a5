"""The eval's task queue is its own: replayed tools are served from the eval worker's
memory, so a suite whose queue another worker polls is refused before any case runs."""

from __future__ import annotations

import asyncio
import contextlib
import uuid

import pytest
import yaml
from support import add_script, agent_definitions
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import PollActivityTaskQueueRequest

from weft import evals
from weft.client.evals.queue import pollers


async def test_a_queue_polled_by_another_worker_is_refused(
    temporal_client, scripted_server, weft_config, tmp_path
):
    """With another worker polling the eval's queue, `run_suite` refuses at start naming
    the queue and that worker, and runs no case."""
    queue = f"shared-{uuid.uuid4().hex[:8]}"
    poll = asyncio.create_task(
        temporal_client.workflow_service.poll_activity_task_queue(
            PollActivityTaskQueueRequest(
                namespace=temporal_client.namespace,
                task_queue=TaskQueue(name=queue),
                identity="prod-worker@elsewhere",
            )
        )
    )
    try:
        async with asyncio.timeout(10):  # until the server lists the poll
            while not await pollers(temporal_client, queue):
                await asyncio.sleep(0.05)
        suite = tmp_path / "suite"
        suite.mkdir()
        (suite / "c.yaml").write_text(
            yaml.safe_dump({"agent": "helper", "turns": [{"user": "hi"}]})
        )
        with pytest.raises(evals.EvalQueueError, match=rf"{queue}.*prod-worker@elsewhere"):
            await evals.run_suite(
                temporal_client,
                suite,
                agent_definitions(add_script(scripted_server, {"replies": [{"text": "hello"}]})),
                config=weft_config,
                scripted=scripted_server,
                results=tmp_path / "results",
                task_queue=queue,
            )
        assert not (tmp_path / "results").exists(), "a case ran"
    finally:
        poll.cancel()
        with contextlib.suppress(BaseException):
            await poll


async def test_a_named_queue_of_its_own_runs(
    temporal_client, scripted_server, weft_config, tmp_path
):
    """A queue named by the caller that no other worker polls runs the suite as usual."""
    suite = tmp_path / "suite"
    suite.mkdir()
    case = {"agent": "helper", "turns": [{"user": "hi", "expect": {"contains": "hello"}}]}
    (suite / "c.yaml").write_text(yaml.safe_dump(case))
    report = await evals.run_suite(
        temporal_client,
        suite,
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hello"}]})),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
        task_queue=f"mine-{uuid.uuid4().hex[:8]}",
    )
    assert report.ok, report.cases
