"""How the control routes describe a closed or closing thread: the 409 names how it closed in
the CLI's words, and a second terminate never answers 202 as if it were the one that
terminated the thread."""

from __future__ import annotations

import uuid

import pytest
from api_support import api_stack, idle, read_until
from support import add_script, agent_definitions, start_thread

from weft.cli.thread_guard import ThreadError, check_thread


async def test_a_second_terminate_of_a_terminating_thread_is_409(temporal_client, weft_config):
    """A thread sent `terminate` that has not closed yet (no worker runs it) answers a second
    terminate with 409 "already terminating", not 202."""
    task_queue = f"tq-idle-{uuid.uuid4().hex[:8]}"  # no worker polls it: the thread waits
    async with api_stack(temporal_client, weft_config, task_queue) as stack:
        handle = await start_thread(temporal_client, task_queue)
        try:
            path = f"/threads/{handle.id}/terminate"
            first = await stack.http.post(path, json={"reason": "first"})
            assert first.status_code == 202, first.text
            second = await stack.http.post(path, json={"reason": "second"})
            assert second.status_code == 409, second.text
            assert "already terminating" in second.json()["error"]
            assert handle.id in second.json()["error"]
            # Other control routes still act on it: only terminate is already done.
            other = await stack.http.post(f"/threads/{handle.id}/tools/refresh")
            assert other.status_code == 202, other.text
        finally:
            await handle.terminate(reason="test cleanup")


async def test_a_closed_thread_is_described_as_the_cli_describes_it(
    start_worker, temporal_client, weft_config, scripted_server
):
    """After terminate, every control route's 409 says "closed (terminated)", the same line
    `weft thread …` prints, and a second terminate is that 409 too."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "unused"}]}))
    )
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        started = await stack.http.post("/threads", json={"agent": "helper"})
        assert started.status_code == 201, started.text
        thread_id = started.json()["threadId"]
        await read_until(stack, thread_id, idle(0))
        first = await stack.http.post(f"/threads/{thread_id}/terminate")
        assert first.status_code == 202, first.text
        await stack.ctx.threads.result(thread_id)

        with pytest.raises(ThreadError) as cli:
            await check_thread(temporal_client, weft_config, thread_id, closed_ok=False)
        assert "(terminated)" in str(cli.value)
        for suffix, body in (("/terminate", None), ("/messages", {"content": "x"})):
            reply = await stack.http.post(f"/threads/{thread_id}{suffix}", json=body)
            assert reply.status_code == 409, reply.text
            assert reply.json()["error"] == str(cli.value), suffix
