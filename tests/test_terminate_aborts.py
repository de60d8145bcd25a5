"""Terminate aborts what is in flight, and a late completion writes nothing.

A real dev server, a real stdio MCP server (tests/mcp_servers/tools_server.py) and function
tools that wait; terminate arrives while the call runs.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcp_support import stdio_server
from support import (
    WaitArgs,
    add_script,
    agent_definitions,
    event_schema_validator,
    start_thread,
    stored_events,
    until,
    wait_for_cancel,
)

from weft.definitions import define_tool


async def _closed(handle: Any) -> None:
    await asyncio.wait_for(handle.result(), timeout=60)


def _assert_one_outcome(worker: Any, thread_id: str, call_id: str) -> None:
    """The call has exactly one outcome in the log: aborted, and no result after it."""
    outcomes = [
        e
        for e in stored_events(worker, thread_id, "tool.result", "tool.failed")
        if e.tool_call_id == call_id
    ]
    assert [(e.type, e.payload.get("errorCode")) for e in outcomes] == [("tool.failed", "aborted")]
    results = [m for m in worker.store.messages.list(thread_id) if m.role == "tool"]
    assert [m.tool_status for m in results] == ["error"]
    validator = event_schema_validator()
    for event in stored_events(worker, thread_id):
        validator.validate(event.to_wire())


async def test_terminate_cancels_an_in_flight_mcp_call(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """Terminate during an MCP call cancels it at the server (`notifications/cancelled`),
    and the call's only outcome in the log is `tool.failed` aborted."""
    note = tmp_path / "mcp-cancelled"
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "t_slow", "arguments": {"seconds": 20, "note": str(note)}}
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    server = stdio_server("tools", prefix="t_", allow=["slow"])
    definitions = agent_definitions(script, tools=[{"mcp": "tools"}]).add(server)
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "wait"}]
    )
    started = await until(
        lambda: stored_events(worker, handle.id, "tool.started"), "the MCP call started"
    )
    await handle.signal("terminate", {"reason": "stop now"})
    await _closed(handle)
    await until(lambda: note.exists(), "the MCP server saw the call cancelled")
    assert note.read_text() == "cancelled"
    _assert_one_outcome(worker, handle.id, started[0].tool_call_id)


async def test_terminate_cancels_an_in_flight_function_tool(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """Terminate during a function tool cancels the tool's task (through the activity's
    heartbeats), and the call's only outcome in the log is `tool.failed` aborted."""
    note = tmp_path / "tool-cancelled"
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "wait_for_cancel", "arguments": {"note": str(note)}}]},
                {"text": "done"},
            ]
        },
    )
    definitions = agent_definitions(script, tools=["wait_for_cancel"]).add(
        define_tool(
            name="wait_for_cancel",
            description="Waits until cancelled",
            args=WaitArgs,
            execute=wait_for_cancel,
        )
    )
    worker = await start_worker(definitions)
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "wait"}]
    )
    started = await until(
        lambda: stored_events(worker, handle.id, "tool.started"), "the tool call started"
    )
    await handle.signal("terminate", {"reason": "stop now"})
    await _closed(handle)
    await until(lambda: note.exists(), "the tool saw its activity cancelled")
    _assert_one_outcome(worker, handle.id, started[0].tool_call_id)
