"""Correlation ids (seed 001 envelope): a parent's and its child's events join into one
graph by their ids alone."""

from __future__ import annotations

from typing import Any

from subagent_support import family, start_boss
from support import add_script, event_schema_validator, idle_after, wait_until

from weft.contract.events import Event


def produced_by_activity(event: Event) -> bool:
    """Workflow-produced events have ids the workflow generated (`evt_…`)."""
    return not event.event_id.startswith("evt_")


def correlation_problems(
    parent: list[Event], children: dict[str, list[Event]], runs: dict[str, set[str]]
) -> list[str]:
    """What keeps these events from joining into one graph by ids alone (empty: they join).

    `children` maps each child thread id to its events; `runs` maps each thread to its
    Temporal run ids, the only runs its events may name.
    """
    problems: list[str] = []
    everything = [*parent, *(e for events in children.values() for e in events)]
    sessions = {e.session_id for e in everything}
    if len(sessions) != 1 or None in sessions:
        problems.append(f"one session expected across the tree, found {sessions}")
    spawned = {e.subagent_id for e in parent if e.type == "subagent.spawned"}
    for event in everything:
        where = f"{event.thread_id} {event.type} {event.event_id}"
        if event.run_id not in runs[event.thread_id]:
            problems.append(f"{where}: run_id {event.run_id} is not a run of its thread")
        if event.type.startswith("tool.") and not event.tool_call_id:
            problems.append(f"{where}: no tool_call_id")
        if produced_by_activity(event) and not event.attempt_id:
            problems.append(f"{where}: no attempt_id")
        if event.type.startswith("subagent.") and not event.subagent_id:
            problems.append(f"{where}: no subagent_id")
    for child_id, events in children.items():
        if child_id not in spawned:
            problems.append(f"child {child_id} has no subagent.spawned in its parent")
        problems += [
            f"{child_id} {e.type}: subagent_id {e.subagent_id}"
            for e in events
            if e.subagent_id != child_id
        ]
    return problems


async def _run_ids(client: Any, thread_id: str) -> set[str]:
    runs = set()
    async for execution in client.list_workflows(f"WorkflowId = '{thread_id}'"):
        runs.add(execution.run_id)
    return runs


async def test_parent_and_child_events_join_by_ids(start_worker, temporal_client, scripted_server):
    """Every event of a parent and its child carries the tree's session, its run, and the ids
    that tie a child's events to the parent's spawn, tools to their calls, activity events
    to their attempts; every event validates against the schema."""
    parent_script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "Rome?"}}]},
                {"text": "Rome is warm."},
            ]
        },
    )
    child_script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Rome"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "21 C"}}]},
            ]
        },
    )
    worker = await start_worker(family(parent_script, child_script))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    [entry] = state.children
    child_id = entry["reference"]
    await temporal_client.get_workflow_handle(child_id).result()
    parent_events = worker.store.events.read(handle.id, limit=10_000)
    child_events = worker.store.events.read(child_id, limit=10_000)
    runs = {
        handle.id: await _run_ids(temporal_client, handle.id),
        child_id: await _run_ids(temporal_client, child_id),
    }

    assert correlation_problems(parent_events, {child_id: child_events}, runs) == []
    assert {e.session_id for e in parent_events} == {f"session-{handle.id}"}
    assert any(e.type == "tool.result" for e in child_events)  # the child's own tool ran
    validator = event_schema_validator()
    for event in [*parent_events, *child_events]:
        errors = [err.message for err in validator.iter_errors(event.to_wire())]
        assert errors == [], (event.type, errors)


def test_the_validator_sees_broken_joins():
    """Each id the join relies on, when missing or wrong, is reported."""
    base = {"timestamp": "2026-01-01T00:00:00Z", "session_id": "s", "run_id": "r1"}
    spawned = Event(
        type="subagent.spawned", event_id="evt_1", thread_id="p", subagent_id="c", **base
    )
    tool = Event(
        type="tool.result",
        event_id="e2",
        thread_id="c",
        subagent_id="c",
        tool_call_id="t",
        attempt_id="a",
        **{**base, "run_id": "r2"},
    )
    runs = {"p": {"r1"}, "c": {"r2"}}
    assert correlation_problems([spawned], {"c": [tool]}, runs) == []
    broken = [
        tool.model_copy(update={"session_id": "other"}),
        tool.model_copy(update={"run_id": "r1"}),
        tool.model_copy(update={"tool_call_id": None}),
        tool.model_copy(update={"attempt_id": None}),
        tool.model_copy(update={"subagent_id": None}),
    ]
    for event in broken:
        assert correlation_problems([spawned], {"c": [event]}, runs), event
    assert correlation_problems([], {"c": [tool]}, runs)  # no spawn to join the child to
