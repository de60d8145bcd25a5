"""Tools reach the runCode sandbox through ThreadState, and terminate aborts the code."""

from __future__ import annotations

import json

from support import (
    CodeArgs,
    add_script,
    agent_definitions,
    idle_after,
    run_js,
    start_thread,
    wait_until,
)

from weft.contract.thread import ThreadResult
from weft.definitions import Definitions, define_tool


def _definitions(script: str) -> Definitions:
    definitions = agent_definitions(script, tools=["run_js"])
    return definitions.add(
        define_tool(name="run_js", description="Run JavaScript", args=CodeArgs, execute=run_js)
    )


async def test_tool_runs_code_in_the_sandbox(start_worker, temporal_client, scripted_server):
    """state.run_code runs a module and its result becomes the tool result."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "run_js",
                            "arguments": {
                                "source": "export default function () { return [6 * 7, typeof globalThis.fetch] }"
                            },
                        }
                    ]
                },
                {"text": "computed"},
            ]
        },
    )
    worker = await start_worker(_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "compute"}]
    )
    await wait_until(handle, idle_after(1))
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    result = json.loads(tool.content)["result"]
    assert result["status"] == "success" and result["result"] == [42, "undefined"]


async def test_terminate_aborts_running_code(start_worker, temporal_client, scripted_server):
    """Terminating a thread whose tool runs an endless loop kills the code and closes."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "run_js", "arguments": {"source": "while (true) {}"}}]},
            ]
        },
    )
    worker = await start_worker(_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        options={"heartbeatTimeoutSeconds": 5},
        messages=[{"role": "user", "content": "loop"}],
    )
    for _ in range(400):
        if worker.store.events.read(handle.id, types=["tool.started"]):
            break
        import asyncio

        await asyncio.sleep(0.05)
    await handle.signal("terminate", {"reason": "stop the loop"})
    result = ThreadResult.model_validate(await handle.result())
    assert result.status == "cancelled"
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert tool.tool_status == "error" and "terminated" in tool.content
