"""The tool facts of 001: `tool.progress` from a tool's ThreadState and
`tool.args` as a model streams a tool call's arguments; through real threads, each event
valid against the vendored schema."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from effect_support import effect_definitions
from pydantic import BaseModel
from support import add_script, event_schema_validator, idle_after, start_thread, wait_until

from weft.activities.tool_state import ThreadState
from weft.contract.effects import UPDATE_SCHEDULE_EFFECT_CHECKED, ScheduleEffectResult
from weft.definitions import (
    Definitions,
    define_agent,
    define_effect,
    define_model,
    define_prompt,
    define_tool,
)
from weft.store import Store


class StepsArgs(BaseModel):
    """How many steps the long job takes."""

    steps: int


async def long_job(state: Any, args: StepsArgs) -> str:
    """Reports its progress after each step."""
    for n in range(1, args.steps + 1):
        await state.progress(f"step {n} of {args.steps}", fraction=n / args.steps, data={"n": n})
    return "all done"


async def overdone(state: Any, args: StepsArgs) -> str:
    """Reports a fraction over 1."""
    await state.progress("more than done", fraction=args.steps)
    return "unreachable"


class PlaceArgs(BaseModel):
    """Where to look."""

    city: str
    country: str


def lookup(state: Any, args: PlaceArgs) -> str:
    """Looks a place up."""
    return f"{args.city}, {args.country}: found"


def _definitions(script: str) -> Definitions:
    return Definitions().add(
        define_model(name="m", provider="scripted", model=script),
        define_prompt(
            name="p",
            toolDescription="d",
            model="m",
            prompt="Use your tools.",
            tools=["long_job", "overdone", "lookup"],
        ),
        define_agent(name="helper", sideA={"prompt": "p"}),
        define_tool(name="long_job", description="A long job", args=StepsArgs, execute=long_job),
        define_tool(name="overdone", description="Overdone", args=StepsArgs, execute=overdone),
        define_tool(name="lookup", description="Look up", args=PlaceArgs, execute=lookup),
    )


async def _run(start_worker: Any, temporal_client: Any, script: str) -> tuple[Any, list[Any]]:
    worker = await start_worker(_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1))
    deadline = asyncio.get_running_loop().time() + 30
    while True:  # the idle write (the workflow's events) follows the status by a moment
        events = worker.store.events.read(handle.id, limit=10_000)
        if any(e.type == "thread.updated" and e.payload.get("status") == "idle" for e in events):
            break
        assert asyncio.get_running_loop().time() < deadline, "the idle write was never stored"
        await asyncio.sleep(0.05)
    validator = event_schema_validator()
    for event in events:
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"
    return worker, events


async def test_a_tool_reports_its_progress(start_worker, temporal_client, scripted_server):
    """Each state.progress writes a tool.progress of the running call, in order, between
    its tool.started and tool.result."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "long_job", "arguments": {"steps": 3}}]},
                {"text": "finished"},
            ]
        },
    )
    _, events = await _run(start_worker, temporal_client, script)
    [started] = [e for e in events if e.type == "tool.started"]
    [result] = [e for e in events if e.type == "tool.result"]
    progress = [e for e in events if e.type == "tool.progress"]
    assert [e.payload for e in progress] == [
        {"message": f"step {n} of 3", "fraction": n / 3, "data": {"n": n}} for n in (1, 2, 3)
    ]
    assert {e.tool_call_id for e in progress} == {started.tool_call_id}
    assert all(e.turn_id == started.turn_id for e in progress)
    sequences = [e.sequence for e in progress]
    assert started.sequence < sequences[0] and sequences == sorted(sequences)
    assert sequences[-1] < result.sequence


async def test_a_bad_fraction_is_the_tools_error(start_worker, temporal_client, scripted_server):
    """A fraction over 1 fails the tool call with an error naming `fraction`, and writes
    no tool.progress."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "overdone", "arguments": {"steps": 2}}]},
                {"text": "noted"},
            ]
        },
    )
    _, events = await _run(start_worker, temporal_client, script)
    [failed] = [e for e in events if e.type == "tool.failed"]
    assert "`fraction` must be a number from 0 to 1" in failed.payload["error"]
    assert not [e for e in events if e.type == "tool.progress"]


async def test_progress_outside_a_call_is_refused(tmp_path: Path) -> None:
    """A hook's state (no tool call, no effect) refuses progress with a clear error."""
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    state = ThreadState(
        store=store,
        thread_id="t-progress",
        agent_id="a",
        user_id=None,
        session_id=None,
        turn_id=None,
        tool_call_id=None,
        env={},
        abort=asyncio.Event(),
    )
    try:
        with pytest.raises(RuntimeError, match="not hooks"):
            await state.progress("half", fraction=0.5)
    finally:
        store.close()


async def test_streamed_tool_arguments_are_tool_args(
    start_worker, temporal_client, scripted_server
):
    """Two interleaved streamed tool calls write tool.args batches per call, whose texts
    join into each call's stored arguments; no model.delta carries them."""
    calls = [
        {"name": "lookup", "arguments": {"city": "Lisbon", "country": "Portugal"}},
        {"name": "lookup", "arguments": {"city": "Porto", "country": "Portugal"}},
    ]
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": calls, "chunk_size": 4, "interleave_tool_calls": True},
                {"text": "both found"},
            ]
        },
    )
    worker, events = await _run(start_worker, temporal_client, script)
    args = [e for e in events if e.type == "tool.args"]
    assert {e.payload["toolCallIndex"] for e in args} == {0, 1}
    assert all(e.step_id and e.model_request_id and e.attempt_id for e in args)
    thread_id = events[0].thread_id
    [assistant] = [m for m in worker.store.messages.list(thread_id) if m.tool_calls]
    for index, call in enumerate(assistant.tool_calls):
        text = "".join(e.payload["text"] for e in args if e.payload["toolCallIndex"] == index)
        assert json.loads(text) == json.loads(call.function.arguments)
    assert not [e for e in events if e.type == "model.delta" and e.payload["kind"] != "text"]


async def test_an_effect_reports_progress_with_its_outcome(
    start_worker, temporal_client, scripted_server
):
    """An effect's state.progress writes tool.progress events (no tool call: the effect's
    ids), committed with its outcome, before its job.completed."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    definitions = effect_definitions(script).add(
        define_effect(name="crunch", args=StepsArgs, execute=long_job)
    )
    worker = await start_worker(definitions)
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, idle_after(0))
    scheduled = await handle.execute_update(
        UPDATE_SCHEDULE_EFFECT_CHECKED,
        {"name": "crunch", "args": {"steps": 2}, "delayMs": 0},
        result_type=ScheduleEffectResult,
    )
    assert scheduled.status == "scheduled"
    deadline = asyncio.get_running_loop().time() + 30
    while not worker.store.events.read(handle.id, types=["job.completed"]):
        assert asyncio.get_running_loop().time() < deadline, "the effect never completed"
        await asyncio.sleep(0.05)
    events = worker.store.events.read(handle.id, types=["tool.progress", "job.completed"])
    *progress, completed = events
    assert [e.payload["message"] for e in progress] == ["step 1 of 2", "step 2 of 2"]
    assert all(e.tool_call_id is None for e in progress)
    assert all(e.event_id.startswith(scheduled.id) for e in progress)
    assert completed.type == "job.completed"
    validator = event_schema_validator()
    for event in events:
        validator.validate(event.to_wire())
    await handle.signal("terminate", {})
