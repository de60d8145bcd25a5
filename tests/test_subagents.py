"""Subagents as child workflows (Runtime §7, §8, §10) on the real dev server."""

from __future__ import annotations

import json

from subagent_support import family
from support import add_script, idle_after, read, start_thread, wait_until


def _tool_result(store, thread_id: str, name: str) -> dict:
    found = [m for m in store.list_messages(thread_id) if m.role == "tool" and m.name == name]
    assert found, f"no {name} tool result in {thread_id}"
    return json.loads(found[-1].content)


async def test_blocking_subagent_answers_its_parent(start_worker, temporal_client, scripted_server):
    """The child's sessionStop payload becomes the parent's tool result; the child ends."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "How warm is Rome?"}}]},
                {"text": "Rome is warm."},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": "Rome: 21 C"}}]}]},
    )
    worker = await start_worker(family(parent, child))
    handle = await start_thread(
        temporal_client, worker.task_queue, agent="boss", messages=[{"role": "user", "content": "go"}]
    )
    state = await wait_until(handle, idle_after(1))
    result = _tool_result(worker.store, handle.id, "researcher")
    assert result["status"] == "success", result
    assert result["result"]["response"] == "Rome: 21 C"
    [entry] = state.children
    assert entry["name"] == "researcher" and entry["status"] == "completed"
    assert entry["blocking"] is True and entry["resumable"] is False
    assert entry["lastResult"] == "Rome: 21 C"
    child_handle = temporal_client.get_workflow_handle(entry["reference"])
    done = await child_handle.result()
    assert done["status"] == "cancelled"
    # The child's usage rolled up into the parent's totals.
    assert state.usage.input_tokens > entry["usage"]["inputTokens"] > 0
    assert worker.store.list_messages(handle.id)[-1].content == "Rome is warm."
