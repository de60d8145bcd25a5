"""Seed 001: "events can be replayed into a read model". The `thread_read` rebuilt from a
thread's stored events alone (contract/rebuild.py) equals the live one, for every recorded
scenario and for one long thread that continues as new, compacts, runs an effect and a
subagent and is terminated."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from effect_support import PlanArgs, RemindArgs, plan, remind
from scenarios import DRIVERS, Probe
from subagent_support import family
from support import (
    NoteArgs,
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    note,
    read,
    start_thread,
    store_of,
    wait_until,
)

from weft.activities.compaction import REQUEST_MARKER
from weft.contract.budget import UPDATE_SET_BUDGET
from weft.contract.rebuild import thread_read_from_events
from weft.contract.thread import ThreadRead
from weft.definitions import define_effect, define_tool
from weft.workers.agent_worker import AgentWorker

# Fields that are not facts of the log, each with why; every other field must be equal.
NOT_FACTS = {
    # The workflow time the read was made (a query's, or the close's snapshot): the log's
    # last event is earlier, and no event can state when a later query will run.
    "updatedAt",
}
CATCH_UP_SECONDS = 30.0


def comparable(read: ThreadRead | dict[str, Any]) -> dict[str, Any]:
    """`read` as JSON, less the fields that are not facts of the log."""
    data = read if isinstance(read, dict) else read.model_dump(mode="json", by_alias=True)
    return {k: v for k, v in data.items() if k not in NOT_FACTS}


def rebuilt(worker: AgentWorker, thread_id: str) -> dict[str, Any]:
    """The read model the thread's stored events state."""
    events = store_of(worker).events.read(thread_id, limit=1_000_000)
    return comparable(thread_read_from_events(events))


def differences(live: dict[str, Any], built: dict[str, Any]) -> str:
    """The fields that differ, one a line, for a failure message."""
    lines = [
        f"{key}: live={json.dumps(live.get(key))[:400]} rebuilt={json.dumps(built.get(key))[:400]}"
        for key in sorted(set(live) | set(built))
        if live.get(key) != built.get(key)
    ]
    return "\n".join(lines)


async def assert_live_equals_rebuilt(worker: AgentWorker, handle: Any) -> None:
    """At an idle point the live query equals the rebuild, once the store has what the
    workflow produced (its outbox rides on the next activity or flush)."""
    deadline = asyncio.get_running_loop().time() + CATCH_UP_SECONDS
    while True:
        live = comparable(await read(handle))
        built = rebuilt(worker, handle.id)
        if live == built:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{handle.id} rebuilt != live:\n{differences(live, built)}")
        await asyncio.sleep(0.05)


def assert_close_equals_rebuilt(worker: AgentWorker, thread_id: str) -> None:
    """A closed thread: the read model its close stored equals the rebuild of its log."""
    events = store_of(worker).events.read(thread_id, limit=1_000_000)
    snapshots = [e for e in events if e.type == "snapshot.updated"]
    assert snapshots, f"{thread_id} stored no snapshot"
    stored = comparable(snapshots[-1].payload["threadRead"])
    assert stored["status"] == "cancelled", stored["status"]  # the close's, not an older one
    built = comparable(thread_read_from_events(events))
    assert stored == built, f"{thread_id} rebuilt != stored:\n{differences(stored, built)}"
    validator = event_schema_validator()  # the facts added to payloads leave envelopes valid
    for event in events:
        validator.validate(event.model_dump(mode="json", by_alias=True, exclude_none=True))


class Checks:
    """A probe that compares at the quiet point and after the close, and counts both."""

    def __init__(self) -> None:
        self.done: list[str] = []

    def probe(self) -> Probe:
        async def quiet(worker: AgentWorker, handle: Any) -> None:
            await assert_live_equals_rebuilt(worker, handle)
            self.done.append("quiet")

        async def closed(worker: AgentWorker, handle: Any, extra: dict[str, Any]) -> None:
            assert_close_equals_rebuilt(worker, handle.id)
            self.done.append("closed")
            child = extra.get("child")
            if child is not None:  # the parent's terminate closes its subagents too
                await child.result()
                assert_close_equals_rebuilt(worker, child.id)
                self.done.append("child closed")

        return Probe(queue=f"rebuild-{uuid.uuid4().hex[:8]}", quiet=quiet, closed=closed)


# Threads terminated mid-call or while a caller waits on a turn are never idle.
NEVER_QUIET = {"terminated_mid_call", "asks", "truthful_log"}


@pytest.mark.parametrize("name", list(DRIVERS))
async def test_every_recorded_scenario_rebuilds_its_read_model(
    name: str, temporal_client: Any, scripted_server: Any, weft_config: Any
) -> None:
    """Each scenario of tests/histories/: the rebuild equals the live read when idle and
    the stored read once closed."""
    checks = Checks()
    await DRIVERS[name](temporal_client, scripted_server, weft_config, checks.probe())
    expected = ["closed"] if name in NEVER_QUIET else ["quiet", "closed"]
    if name == "subagents":
        expected.append("child closed")
    assert checks.done == expected


async def test_a_thread_waiting_on_a_person_rebuilds_its_read_model(
    start_worker: Any, temporal_client: Any, scripted_server: Any
) -> None:
    """While a permission is asked, the rebuild shows the pending action and the wait;
    once approved for the session, the idle thread's approvals too."""
    model = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "note", "arguments": {"text": "x"}}]},
                {"text": "noted"},
            ]
        },
    )
    worker = await start_worker(agent_definitions(model, permissions={"mode": "default"}))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hello"}]
    )
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    assert state.status == "waiting_permission"
    await assert_live_equals_rebuilt(worker, handle)
    await handle.execute_update(
        "respond_action_checked",
        {
            "actionId": state.pending_actions[0]["actionId"],
            "decision": "approve",
            "scope": "session",
        },
    )
    state = await wait_until(handle, idle_after(1))
    assert state.permission_state["sessionAllowedTools"] == ["note"]
    await assert_live_equals_rebuilt(worker, handle)


async def test_a_long_thread_rebuilds_its_read_model(
    start_worker: Any, temporal_client: Any, scripted_server: Any
) -> None:
    """Continue-as-new every 20 history events, a compaction, an effect that starts a
    turn, a blocking subagent, a budget raised while idle and a terminate: the rebuild
    equals the live read and the stored one, and the log holds each of those facts."""
    parent, child = f"rb-{uuid.uuid4().hex[:10]}", f"rb-{uuid.uuid4().hex[:10]}"
    effect = {"effect": "remind", "args": {"text": "reminder"}, "delay_ms": 300}
    scripted_server.set_script(
        parent,
        {
            "turns": [
                {"match": REQUEST_MARKER, "replies": [{"text": "Summary: a long thread."}]},
                {"match": "reminder", "replies": [{"text": "reminded"}]},
                {"match": "one more", "replies": [{"text": "still here"}]},
                {
                    "match": "*",
                    "replies": [
                        {"tool_calls": [{"name": "researcher", "arguments": {"message": "q"}}]},
                        {"tool_calls": [{"name": "note", "arguments": {"text": "n"}}], "repeat": 4},
                        {"tool_calls": [{"name": "plan", "arguments": effect}]},
                        {"text": "all done"},
                    ],
                },
            ]
        },
    )
    scripted_server.set_script(
        child,
        {
            "replies": [
                {"tool_calls": [{"name": "progress", "arguments": {"note": "busy"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "fine"}}]},
            ]
        },
    )
    tools = ["researcher", "note", "plan"]
    definitions = family(
        parent,
        child,
        parent_tools=tools,
        extra=[
            define_tool(name="note", description="Remember a note", args=NoteArgs, execute=note),
            define_tool(name="plan", description="Schedule an effect", args=PlanArgs, execute=plan),
            define_effect(name="remind", args=RemindArgs, execute=remind),
        ],
    )
    worker = await start_worker(definitions)
    started = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="boss",
        options={"continueAsNewEvents": 20, "budget": {"maxModelCalls": 1_000}},
        messages=[{"role": "user", "content": "go"}],
    )
    handle = temporal_client.get_workflow_handle(started.id)  # follows the newest run
    # The reminder joins the running turn or starts its own: either way it is answered last.
    await wait_until(
        handle, lambda s: idle_after(1)(s) and s.last_outcome == "reminded", timeout=90
    )
    await assert_live_equals_rebuilt(worker, handle)
    raised = {"budget": {"maxModelCalls": 2_000, "maxTokens": 10_000_000}}
    await handle.execute_update(UPDATE_SET_BUDGET, raised)
    await assert_live_equals_rebuilt(worker, handle)
    # Compacted while idle (a compaction a tool asks for mid-turn, in a thread that
    # continues as new between steps, is not replay-safe today: see the report of #41);
    # the next turn's end states the context it left.
    await handle.signal("compact", {"reason": "tidy"})
    await wait_until(handle, lambda s: bool(s.context and s.context["compactions"]), timeout=60)
    await handle.signal("queue_message", {"role": "user", "content": "one more"})
    await wait_until(
        handle, lambda s: idle_after(1)(s) and s.last_outcome == "still here", timeout=60
    )
    await assert_live_equals_rebuilt(worker, handle)

    await handle.signal("terminate", {"reason": "done"})
    await handle.result()
    assert_close_equals_rebuilt(worker, started.id)
    types = {e.type for e in worker.store.events.read(started.id, limit=1_000_000)}
    assert {"context.compaction.completed", "job.completed", "subagent.completed"} <= types
    runs = [
        e
        for e in worker.store.events.read(started.id, limit=1_000_000, types=["thread.updated"])
        if "continuedAsNew" in e.payload
    ]
    assert len(runs) >= 2, "the thread should have continued as new more than once"
