"""A session's definitions check rides on its first `model.call`: no local activity, no
boundary of its own, and the same facts as a check at the turn boundary when the worker
serves newer definitions (or cannot serve the agent)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from support import (
    add_script,
    agent_definitions,
    assert_every_run_replays,
    event_schema_validator,
    idle_after,
    start_thread,
    store_of,
    wait_until,
)
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from test_context_compaction import chat_script
from test_context_compaction import definitions as compacting
from test_definitions_versions import events_of, send, serving, system_prompts, versioned

from weft.activities.served_definitions import ServedDefinitions
from weft.activities.snapshots import SnapshotCache
from weft.contract.definitions_version import DEFINITIONS_CHANGED, snapshot_digest
from weft.contract.thread import ThreadRead
from weft.definitions import Definitions, define_agent, define_model, define_prompt
from weft.store import Store


def context_of(state: ThreadRead) -> dict[str, Any]:
    """The thread's `context` read model (tokens against the budget, compactions)."""
    assert state.context is not None
    return state.context


def refresh_markers(history: WorkflowHistory) -> int:
    """How many `definitions.refresh` local activities the run recorded."""
    return sum(
        1
        for event in history.events
        if event.marker_recorded_event_attributes.marker_name == "core_local_activity"
        and "definitions.refresh" in str(event.marker_recorded_event_attributes.details)
    )


def model_call_failures(history: WorkflowHistory) -> list[dict[str, Any]]:
    """The failure of every `model.call` that failed, as its application failure info."""
    failed = EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    found = []
    for event in history.events:
        if event.event_type == failed:
            failure = event.activity_task_failed_event_attributes.failure
            found.append(
                {
                    "type": failure.cause.application_failure_info.type
                    or failure.application_failure_info.type,
                    "message": failure.message,
                }
            )
    return found


async def test_sessions_check_their_definitions_without_a_local_activity(
    temporal_client, weft_config, scripted_server
):
    """Two sessions of a `latest` thread on one worker: neither runs `definitions.refresh`
    (a marker and an activation each before), no model call fails, and the run replays."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    definitions = versioned(script, "You are version one.")
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, definitions, queue) as w:
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": "first"}]
        )
        await wait_until(handle, idle_after(1))
        await send(handle, "second")
        await wait_until(handle, idle_after(2))
        history = await handle.fetch_history()
        assert refresh_markers(history) == 0
        assert model_call_failures(history) == []
        assert not [e for e in events_of(w, handle.id) if e.type == "policy.changed"]
        await assert_every_run_replays(temporal_client, handle)
        await handle.signal("terminate", {"reason": "done"})


async def test_newer_definitions_fail_the_first_call_unsent_and_move_the_thread(
    temporal_client, weft_config, scripted_server
):
    """On a worker with a changed prompt, the session's first call is refused before it
    writes or sends anything; the thread moves, `policy.changed` precedes the session's
    `turn.started` (which names the new digest), and the call made again sends the new
    prompt. The history replays."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    v1, v2 = versioned(script, "You are version one."), versioned(script, "You are version two.")
    d1, d2 = snapshot_digest(v1.snapshot("helper")), snapshot_digest(v2.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": "first"}]
        )
        await wait_until(handle, idle_after(1))
    async with serving(temporal_client, weft_config, scripted_server, v2, queue) as worker:
        await send(handle, "second")
        state = await wait_until(handle, idle_after(2))
        assert state.definitions_digest == d2
        assert system_prompts(scripted_server, script) == [
            "You are version one.",
            "You are version two.",
        ]
        history = await handle.fetch_history()
        assert refresh_markers(history) == 0
        (failure,) = model_call_failures(history)
        assert failure["type"] == DEFINITIONS_CHANGED
        assert d1 in failure["message"] and d2 in failure["message"]

        events = events_of(worker, handle.id)
        turns = [e for e in events if e.type == "turn.started"]
        (changed,) = [e for e in events if e.type == "policy.changed"]
        assert (changed.payload["previousDigest"], changed.payload["definitionsDigest"]) == (
            d1,
            d2,
        )
        assert changed.turn_id is None  # a fact of the boundary, not of the turn
        # Where the boundary's refresh put it: before every event of the second session.
        running = [
            e for e in events if e.type == "session.updated" and e.payload["status"] == "running"
        ]
        assert changed.sequence is not None and running[1].sequence is not None
        assert changed.sequence < running[1].sequence
        assert turns[1].payload["definitionsDigest"] == d2
        assert changed.timestamp <= turns[1].timestamp
        # The refused call wrote nothing: one request, one completion in the session.
        requested = [e for e in events if e.type == "model.requested"]
        assert len(requested) == 2 and len([e for e in events if e.type == "model.completed"]) == 2
        validator = event_schema_validator()
        for event in (changed, turns[1]):
            validator.validate(event.model_dump(mode="json", by_alias=True, exclude_none=True))
        assert (
            store_of(worker).definitions_versions.snapshot_id(d2) == changed.payload["snapshotId"]
        )
        await assert_every_run_replays(temporal_client, handle)
        await handle.signal("terminate", {"reason": "done"})


async def test_a_worker_that_cannot_serve_the_agent_warns_and_the_thread_keeps_its_own(
    temporal_client, weft_config, scripted_server
):
    """A worker whose definitions lack the thread's agent: the first call is refused
    unsent, the thread warns `definitions_refresh_refused` ahead of the session's turn and
    answers with the definitions it has."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    v1 = versioned(script, "You are version one.")
    other = Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(name="other_prompt", toolDescription="x", model="scripted", prompt="x"),
        define_agent(name="other", sideA={"prompt": "other_prompt"}),
    )
    d1 = snapshot_digest(v1.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": "first"}]
        )
        await wait_until(handle, idle_after(1))
    async with serving(temporal_client, weft_config, scripted_server, other, queue) as worker:
        await send(handle, "second")
        state = await wait_until(handle, idle_after(2))
        assert state.definitions_digest == d1
        assert system_prompts(scripted_server, script)[-1] == "You are version one."
        events = events_of(worker, handle.id)
        (warning,) = [
            e
            for e in events
            if e.type == "runtime.warning" and e.payload["code"] == "definitions_refresh_refused"
        ]
        assert "helper" in warning.payload["message"]
        second_turn = [e for e in events if e.type == "turn.started"][1]
        assert (warning.sequence or 0) < (second_turn.sequence or 0)
        await assert_every_run_replays(temporal_client, handle)
        await handle.signal("terminate", {"reason": "done"})


async def test_a_queued_tool_first_leaves_the_check_to_the_local_activity(
    temporal_client, weft_config, scripted_server
):
    """A session that begins with a queued tool runs it before any model call: the check is
    made by `definitions.refresh` at the boundary, so the move is still recorded before the
    tool runs."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    v1 = agent_definitions(script)
    v2 = agent_definitions(script, tools=["weather", "note"])
    d2 = snapshot_digest(v2.snapshot("helper"))
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": "first"}]
        )
        await wait_until(handle, idle_after(1))
    async with serving(temporal_client, weft_config, scripted_server, v2, queue) as worker:
        await handle.signal("queue_tool", {"name": "weather", "args": {"city": "Oslo"}})
        state = await wait_until(handle, lambda s: s.definitions_digest == d2)
        assert state.definitions_digest == d2
        await wait_until(handle, lambda s: s.status == "waiting_input" and s.active_turn_id is None)
        history = await handle.fetch_history()
        assert refresh_markers(history) == 1
        events = events_of(worker, handle.id)
        (changed,) = [e for e in events if e.type == "policy.changed"]
        tool_started = [e for e in events if e.type == "tool.started"]
        assert tool_started and (changed.sequence or 0) < (tool_started[-1].sequence or 0)
        await assert_every_run_replays(temporal_client, handle)
        await handle.signal("terminate", {"reason": "done"})


async def test_after_a_move_the_call_fits_the_new_model_window(
    temporal_client, weft_config, scripted_server
):
    """The new definitions' model has a smaller window: after the refused call the thread
    moves, then compacts for the new window (after `policy.changed` and the session's
    `turn.started`, as at a boundary) and calls with the new prompt."""
    script = f"ctx-{uuid.uuid4().hex[:10]}"
    scripted_server.set_script(script, chat_script())
    v1 = compacting(script, prompt="You are version one.")
    v2 = compacting(script, window=2_048, prompt="You are version two.")
    d2 = snapshot_digest(v2.snapshot("helper"))
    text = "The quick brown fox jumps over the lazy dog. " * 90  # about 1,000 tokens
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": text}]
        )
        await wait_until(handle, idle_after(1))
    async with serving(temporal_client, weft_config, scripted_server, v2, queue) as worker:
        await send(handle, text)
        state = await wait_until(handle, idle_after(2))
        assert state.definitions_digest == d2
        history = await handle.fetch_history()
        assert refresh_markers(history) == 0
        assert [f["type"] for f in model_call_failures(history)] == [DEFINITIONS_CHANGED]
        events = events_of(worker, handle.id)
        (changed,) = [e for e in events if e.type == "policy.changed"]
        second_turn = [e for e in events if e.type == "turn.started"][1]
        (compacted,) = [e for e in events if e.type == "context.compaction.completed"]
        assert (changed.sequence or 0) < (second_turn.sequence or 0) < (compacted.sequence or 0)
        assert second_turn.payload["definitionsDigest"] == d2
        # The new prompt, with the summary of what the compaction for its window replaced.
        assert system_prompts(scripted_server, script)[-1].startswith("You are version two.\n")
        await assert_every_run_replays(temporal_client, handle)
        await handle.signal("terminate", {"reason": "done"})


async def test_a_compaction_first_leaves_the_check_to_the_local_activity(
    temporal_client, weft_config, scripted_server
):
    """A session whose first step must compact before its model call asks by the local
    activity just before, and the move still takes its place ahead of the session's
    events: `policy.changed`, then `turn.started` naming the new digest, then the
    compaction, which runs with the new definitions."""
    script = f"ctx-{uuid.uuid4().hex[:10]}"
    scripted_server.set_script(script, chat_script())
    v1 = compacting(script, prompt="You are version one.")
    v2 = compacting(script, prompt="You are version two.")
    d2 = snapshot_digest(v2.snapshot("helper"))
    text = "The quick brown fox jumps over the lazy dog. " * 110  # about 1,200 tokens
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    async with serving(temporal_client, weft_config, scripted_server, v1, queue):
        handle = await start_thread(
            temporal_client, queue, messages=[{"role": "user", "content": text}]
        )
        state = await wait_until(handle, idle_after(1))
        turns, grown = 1, context_of(state)["lastRequestTokens"]
        # Sessions until the next message would not fit: its first step compacts.
        for _ in range(20):
            if context_of(state)["lastRequestTokens"] + grown > context_of(state)["promptBudget"]:
                break
            before = context_of(state)["lastRequestTokens"]
            await send(handle, text)
            turns += 1
            state = await wait_until(handle, idle_after(turns))
            grown = context_of(state)["lastRequestTokens"] - before
        assert context_of(state)["compactions"] == 0
    async with serving(temporal_client, weft_config, scripted_server, v2, queue) as worker:
        await send(handle, text)
        state = await wait_until(handle, idle_after(turns + 1))
        assert state.definitions_digest == d2
        assert context_of(state)["compactions"] == 1
        history = await handle.fetch_history()
        assert refresh_markers(history) == 1
        assert model_call_failures(history) == []
        events = events_of(worker, handle.id)
        (changed,) = [e for e in events if e.type == "policy.changed"]
        running = [
            e for e in events if e.type == "session.updated" and e.payload["status"] == "running"
        ]
        last_turn = [e for e in events if e.type == "turn.started"][-1]
        (compacted,) = [e for e in events if e.type == "context.compaction.completed"]
        assert (changed.sequence or 0) < (running[-1].sequence or 0)
        assert (running[-1].sequence or 0) < (last_turn.sequence or 0)
        assert (last_turn.sequence or 0) < (compacted.sequence or 0)
        assert last_turn.payload["definitionsDigest"] == d2
        assert system_prompts(scripted_server, script)[-1].startswith("You are version two.\n")
        await assert_every_run_replays(temporal_client, handle)
        await handle.signal("terminate", {"reason": "done"})


def test_a_version_is_stored_with_its_snapshot_in_one_transaction(tmp_path, monkeypatch):
    """The snapshot and the version row naming it are one commit (thread.init and a move
    each wrote two before)."""
    store = Store.open(f"sqlite:///{tmp_path / 'store.db'}")
    definitions = versioned("s", "You are version one.")
    served = ServedDefinitions(store, definitions, SnapshotCache(store))
    database = store.snapshots._db
    writes = 0
    real_write = database.write

    def counting_write() -> Any:
        nonlocal writes
        writes += 1
        return real_write()

    monkeypatch.setattr(database, "write", counting_write)
    snapshot, digest = served.version_of("helper")
    served.record(snapshot, digest)
    assert writes == 1
    assert store.definitions_versions.snapshot_id(digest) == snapshot.snapshot_id
    stored = store.snapshots.get(snapshot.snapshot_id)
    assert stored is not None and json.dumps(stored, sort_keys=True) == json.dumps(
        snapshot.model_dump(mode="json", by_alias=True), sort_keys=True
    )
    store.close()
