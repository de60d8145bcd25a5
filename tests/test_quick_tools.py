"""A function tool defined `quick=True` runs as a Temporal local activity
(docs/defining-agents.md, "Quick tools"): its `tool.call` happens inside the thread's
workflow task, so a call costs no activity round trip and no workflow task of its own,
while what it records is what any tool call records."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from support import (
    CityArgs,
    NoteArgs,
    add_script,
    agent_definitions,
    assert_every_run_replays,
    idle_after,
    quick_weather_tool,
    start_thread,
    stored_events,
    until,
    wait_until,
    weather,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus

from weft.contract.activities import ACTIVITY_TOOL_CALL
from weft.contract.thread import SIGNAL_TERMINATE
from weft.definitions import DefinitionError, define_tool

SCHEDULED = EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
MARKER = EventType.EVENT_TYPE_MARKER_RECORDED


def _explode(state: Any, args: NoteArgs) -> str:
    raise RuntimeError(f"quick tool exploded on {args.text!r}")


class SlowArgs(BaseModel):
    """Where the slow tool writes that it finished."""

    path: str


async def _slow(state: Any, args: SlowArgs) -> str:
    """Quick in name only: 1.5 s, so a terminate comes while it runs."""
    Path(args.path).write_text("started")
    await asyncio.sleep(1.5)
    Path(args.path).write_text("finished")
    return "slow done"


def _definitions(script: str) -> Any:
    """The helper agent with quick tools beside the usual (activity) `weather`."""
    return agent_definitions(
        script, tools=["weather", "quick_weather", "quick_explode", "quick_slow"]
    ).add(
        quick_weather_tool(),
        define_tool(
            name="quick_explode",
            description="Always fails, quickly",
            args=NoteArgs,
            execute=_explode,
            quick=True,
        ),
        define_tool(
            name="quick_slow", description="Slow", args=SlowArgs, execute=_slow, quick=True
        ),
    )


async def _activity_types(client: Client, thread_id: str) -> tuple[list[str], list[str]]:
    """The activity types the thread's history scheduled, and those its local activity
    markers record."""
    history = await client.get_workflow_handle(thread_id).fetch_history()
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == SCHEDULED
    ]
    local = [
        json.loads(marker.details["data"].payloads[0].data)["activity_type"]
        for e in history.events
        if e.event_type == MARKER
        and (marker := e.marker_recorded_event_attributes).marker_name == "core_local_activity"
    ]
    return scheduled, local


async def test_quick_tool_calls_run_as_local_activities_and_record_everything(
    start_worker, temporal_client, scripted_server
):
    """Two quick calls and one activity call in one turn: the quick ones are local
    activities (no `tool.call` scheduled for them), every call has its `tool.started` and
    its result, the failing quick tool's error reaches the model, and the history replays."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "quick_weather", "arguments": {"city": "Rome"}},
                        {"name": "weather", "arguments": {"city": "Oslo"}},
                    ]
                },
                {"tool_calls": [{"name": "quick_explode", "arguments": {"text": "boom"}}]},
                {"text": "Rome and Oslo are sunny."},
            ]
        },
    )
    worker = await start_worker(_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "weather?"}]
    )
    await wait_until(handle, idle_after(1))

    scheduled, local = await _activity_types(temporal_client, handle.id)
    assert scheduled.count(ACTIVITY_TOOL_CALL) == 1, scheduled  # only `weather`
    assert local.count(ACTIVITY_TOOL_CALL) == 2, local  # quick_weather, quick_explode

    started = stored_events(worker, handle.id, "tool.started")
    assert sorted(e.payload["name"] for e in started) == [
        "quick_explode",
        "quick_weather",
        "weather",
    ]
    results = {e.payload["name"]: e for e in stored_events(worker, handle.id, "tool.result")}
    assert set(results) == {"quick_weather", "weather"}
    [failed] = stored_events(worker, handle.id, "tool.failed")
    assert failed.payload["name"] == "quick_explode"
    assert "quick tool exploded on 'boom'" in failed.payload["error"]
    # The model saw both tool results and the error, in the transcript the store holds.
    tool_texts = [str(m.content) for m in worker.store.messages.list(handle.id) if m.role == "tool"]
    assert any("Rome" in t for t in tool_texts) and any("Oslo" in t for t in tool_texts)
    assert any("quick tool exploded" in t for t in tool_texts)
    await handle.signal(SIGNAL_TERMINATE, {})
    await asyncio.wait_for(handle.result(), timeout=30)
    await assert_every_run_replays(temporal_client, handle)


async def test_a_terminate_during_a_quick_tool_ends_the_thread_truthfully(
    start_worker, temporal_client, scripted_server, tmp_path
):
    """A terminate sent while a quick tool runs: the thread ends (not stuck), and what it
    recorded of the call is true: a result only if the tool finished, `aborted` only if
    it did not."""
    marker = tmp_path / "slow.txt"
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "quick_slow", "arguments": {"path": str(marker)}}]},
                {"text": "done"},
            ]
        },
    )
    worker = await start_worker(_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go slow"}]
    )
    await until(lambda: marker.exists(), "the quick tool started")
    await handle.signal(SIGNAL_TERMINATE, {"reason": "stop now"})
    await asyncio.wait_for(handle.result(), timeout=30)
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED
    finished = marker.read_text() == "finished"
    results = stored_events(worker, handle.id, "tool.result")
    failures = stored_events(worker, handle.id, "tool.failed")
    if finished:
        assert [e.payload["name"] for e in results] == ["quick_slow"], (results, failures)
    else:
        assert not results and failures, "a tool stopped mid-way recorded no failure"
    updates = stored_events(worker, handle.id, "thread.updated")
    assert any(e.payload.get("reason") == "stop now" for e in updates), updates
    await assert_every_run_replays(temporal_client, handle)


def test_quick_is_checked_and_left_out_of_the_spec_when_false():
    """`quick` must be a bool; a tool that is not quick has the spec (and so the
    definitions digest) it had before the field existed."""
    with pytest.raises(DefinitionError, match="quick"):
        define_tool(
            name="q",
            description="d",
            args=CityArgs,
            execute=weather,
            quick="yes",  # type: ignore[arg-type]
        )
    plain = define_tool(name="q", description="d", args=CityArgs, execute=weather)
    assert "quick" not in plain.spec().model_dump(mode="json", by_alias=True)
    quick = define_tool(name="q", description="d", args=CityArgs, execute=weather, quick=True)
    assert quick.spec().model_dump(mode="json", by_alias=True)["quick"] is True
