"""Outputs over the spill threshold stay in the store; history holds a preview and a ref."""

from __future__ import annotations

from google.protobuf.json_format import MessageToJson
from pydantic import BaseModel
from support import add_script, agent_definitions, idle_after, start_thread, wait_until
from temporalio.api.history.v1 import History

from weft.activities.spill import SPILL_THRESHOLD_BYTES
from weft.definitions import define_tool

FIVE_MB = 5 * 1024 * 1024


class SizeArgs(BaseModel):
    """Arguments of the big-output tool."""

    megabytes: int


def big_output(state: object, args: SizeArgs) -> str:
    """Returns a string of `megabytes` MiB."""
    return "x" * (args.megabytes * 1024 * 1024)


async def test_five_megabyte_tool_output_is_spilled(start_worker, temporal_client, scripted_server):
    """A 5 MB tool result completes the step; history stays small and the store is whole."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "big_output", "arguments": {"megabytes": 5}}]},
                {"text": "that was big"},
            ]
        },
    )
    definitions = agent_definitions(script, tools=["big_output"]).add(
        define_tool(
            name="big_output", description="A huge result", args=SizeArgs, execute=big_output
        )
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go big"}]
    )
    state = await wait_until(handle, idle_after(1), timeout=60)
    assert state.last_outcome == "that was big"
    tool = next(m for m in worker.store.messages.list(handle.id) if m.role == "tool")
    assert len(tool.content) > FIVE_MB
    spilled = worker.store.events.read(handle.id, types=["output.spilled"])
    assert len(spilled) == 1 and spilled[0].payload["bytes"] > FIVE_MB
    assert spilled[0].to_wire()["outputRef"].endswith(f"/messages/{tool.id}")
    history = await handle.fetch_history()
    size = len(MessageToJson(History(events=history.events)).encode())
    assert size < 4 * SPILL_THRESHOLD_BYTES + 200_000, f"history is {size} bytes"
    last_request = scripted_server.requests[-1]
    tool_turn = next(m for m in last_request["messages"] if m["role"] == "tool")
    # The model gets a preview within its budget, naming the stored output to page through.
    assert len(tool_turn["content"]) < 100_000
    assert f"/messages/{tool.id}" in tool_turn["content"]
    assert "call read_output with" in tool_turn["content"]
    assert "read_output" in [t["function"]["name"] for t in last_request["tools"]]
