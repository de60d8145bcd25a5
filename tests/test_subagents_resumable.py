"""Resumable subagents (Runtime §7.2): subagent_create, subagent_message, explicit reports."""

from __future__ import annotations

import json

from subagent_support import family, start_boss
from support import add_script, idle_after, read, wait_until


async def test_resumable_subagents_and_max_instances(
    start_worker, temporal_client, scripted_server
):
    """subagent_create needs a name, honours maxInstances, and subagent_message resumes."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": " "},
                        },
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": "ann", "message": "q1"},
                        },
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": "bob"},
                        },
                        {
                            "name": "subagent_message",
                            "arguments": {"reference": "ann", "message": "q2"},
                        },
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "q1",
                    "replies": [
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r1"}}]}
                    ],
                },
                {
                    "match": "q2",
                    "replies": [
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r2"}}]}
                    ],
                },
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"resumable": {"maxInstances": 1}}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    results = [
        json.loads(m.content) for m in worker.store.messages.list(handle.id) if m.role == "tool"
    ]
    assert [r["status"] for r in results] == ["error", "success", "error", "success"]
    assert "non-empty `name`" in results[0]["error"]
    assert results[1]["result"]["response"] == "r1"
    assert results[2]["error_code"] == "max_instances_reached"
    assert "maxInstances is 1" in results[2]["error"] and "subagent_message" in results[2]["error"]
    assert results[3]["result"]["response"] == "r2"
    [entry] = state.children
    assert entry["name"] == "ann" and entry["resumable"] is True and entry["status"] == "idle"
    # The resumable child stays open, idle between messages.
    child_state = await read(temporal_client.get_workflow_handle(entry["reference"]))
    assert child_state.status == "waiting_input" and child_state.counters.turns >= 2
    assert child_state.parent_thread_id == handle.id


async def test_explicit_communication_only_notify_parent_reaches_the_parent(
    start_worker, temporal_client, scripted_server
):
    """parentCommunication: explicit stops the automatic completion message (§7.2, §8.2)."""
    parent = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "go",
                    "replies": [
                        {
                            "tool_calls": [
                                {
                                    "name": "subagent_create",
                                    "arguments": {
                                        "agent": "researcher",
                                        "name": "ann",
                                        "message": "dig",
                                    },
                                }
                            ]
                        },
                        {"text": "waiting"},
                    ],
                },
                {"match": "need a map", "replies": [{"text": "noted"}]},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "escalate", "arguments": {"text": "need a map"}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": "secret result"}}]},
            ]
        },
    )
    worker = await start_worker(
        family(
            parent,
            child,
            subagent={"blocking": False, "resumable": {"parentCommunication": "explicit"}},
        )
    )
    handle = await start_boss(temporal_client, worker)
    await wait_until(handle, lambda s: bool(s.children) and s.children[0]["status"] == "idle")
    state = await wait_until(handle, idle_after(2))
    from_child = [m for m in worker.store.messages.list(handle.id) if "subagent" in m.metadata]
    assert [m.metadata["subagent"]["kind"] for m in from_child] == ["notify"]
    assert "need a map" in from_child[0].content
    assert all(
        "secret result" not in (m.content or "") for m in worker.store.messages.list(handle.id)
    )
    entry = state.children[0]
    assert entry["statusNote"] == "escalated" and entry["lastResult"] == "secret result"


async def test_a_child_that_reported_still_continues_as_new(
    start_worker, temporal_client, scripted_server
):
    """Reports sent in the background must not block the child's continue-as-new forever."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "subagent_create",
                            "arguments": {"agent": "researcher", "name": "ann", "message": "q1"},
                        },
                        {
                            "name": "subagent_message",
                            "arguments": {"reference": "ann", "message": "q2"},
                        },
                    ]
                },
                {"text": "done"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "q1",
                    "replies": [
                        {"tool_calls": [{"name": "progress", "arguments": {"note": "working"}}]},
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r1"}}]},
                    ],
                },
                {
                    "match": "q2",
                    "replies": [
                        {"tool_calls": [{"name": "report", "arguments": {"summary": "r2"}}]}
                    ],
                },
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"resumable": True}))
    handle = await start_boss(temporal_client, worker, options={"continueAsNewEvents": 20})
    state = await wait_until(handle, idle_after(1), timeout=60)
    [entry] = state.children
    assert entry["lastResult"] == "r2" and entry["statusNote"] == "working"
    child_state = await read(temporal_client.get_workflow_handle(entry["reference"]))
    assert child_state.counters.runs >= 2
