"""Spawning subagents (Runtime §7.2, §8.1): blocking or not, flags, attachments, config errors."""

from __future__ import annotations

import pytest
from subagent_support import (
    BRIEF,
    RESULT,
    delegate_then_acknowledge,
    family,
    file_tools,
    start_boss,
    tool_result,
)
from support import add_script, idle_after, start_thread, wait_until


async def test_blocking_subagent_answers_its_parent(start_worker, temporal_client, scripted_server):
    """The child's sessionStop payload becomes the parent's tool result; the child ends."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "researcher",
                            "arguments": {"message": "How warm is Rome?", "label": "Rome desk"},
                        }
                    ]
                },
                {"text": "Rome is warm."},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": "Rome: 21 C"}}]}]},
    )
    worker = await start_worker(family(parent, child, subagent={"initAgentNameProperty": "label"}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    result = tool_result(worker.store, handle.id, "researcher")
    assert result["status"] == "success", result
    assert result["result"]["response"] == "Rome: 21 C"
    [entry] = state.children
    assert entry["name"] == "Rome desk" and entry["status"] == "completed"
    assert entry["blocking"] is True and entry["resumable"] is False
    assert entry["lastResult"] == "Rome: 21 C"
    child_handle = temporal_client.get_workflow_handle(entry["reference"])
    done = await child_handle.result()
    assert done["status"] == "cancelled"
    # The child's usage rolled up into the parent's totals.
    assert state.usage.input_tokens > entry["usage"]["inputTokens"] > 0
    assert worker.store.messages.list(handle.id)[-1].content == "Rome is warm."


async def test_non_blocking_subagent_reports_later_as_a_queued_message(
    start_worker, temporal_client, scripted_server
):
    """blocking: false returns the reference at once; the result is queued to the parent."""
    parent = delegate_then_acknowledge(scripted_server, "Rome?", "thanks for the report")
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "progress", "arguments": {"note": "halfway"}}]},
                {
                    "delay_ms": 300,
                    "tool_calls": [{"name": "report", "arguments": {"summary": "Rome: 21 C"}}],
                },
            ]
        },
    )
    worker = await start_worker(family(parent, child, subagent={"blocking": False}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(2))
    started = tool_result(worker.store, handle.id, "researcher")
    assert started["status"] == "success" and started["result"]["status"] == "running"
    messages = worker.store.messages.list(handle.id)
    [queued] = [m for m in messages if m.metadata.get("subagent", {}).get("kind") == "completed"]
    assert queued.role == "user" and "Rome: 21 C" in queued.content
    assert started["result"]["reference"] in queued.content
    assert messages[-1].content == "thanks for the report"
    assert state.children[0]["status"] == "completed"
    # sessionStatus updated the registry without ending the child's session (§8.3).
    assert state.children[0]["statusNote"] == "halfway"
    notes = [
        e.payload.get("note")
        for e in worker.store.events.read(handle.id, types=["subagent.status"])
    ]
    assert "halfway" in notes


@pytest.mark.parametrize(
    ("immediate", "flag", "enabled"),
    [(True, "YES", True), (True, "0", False), (False, "yes", True), (False, None, False)],
)
async def test_immediate_and_optional_flags(
    start_worker, temporal_client, scripted_server, immediate, flag, enabled
):
    """optional enables the subagent from env (true/1/yes, any case); immediate runs it before
    the first model step and puts its answer in that step's context."""
    parent = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    child = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "report", "arguments": {"summary": "pre-read done"}}]}
            ]
        },
    )
    config = {"optional": "RESEARCH", "immediate": immediate}
    worker = await start_worker(family(parent, child, subagent=config))
    env = {} if flag is None else {"RESEARCH": {"value": flag, "type": "text"}}
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        agent="boss",
        messages=[{"role": "user", "content": "go"}],
        env=env,
    )
    state = await wait_until(handle, idle_after(1))
    [request] = [r for r in scripted_server.requests if r["model"] == parent]
    offered = [t["function"]["name"] for t in request["tools"]]
    assert ("researcher" in offered) is enabled
    ran = immediate and enabled
    assert len(state.children) == (1 if ran else 0)
    texts = [m.get("content") or "" for m in request["messages"]]
    assert any("pre-read done" in t for t in texts) is ran


async def test_attachments_are_copied_both_ways(start_worker, temporal_client, scripted_server):
    """Parent → child and child → parent copies (Runtime §8.1, §8.2); bytes are checked."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "write_brief", "arguments": {"path": "/attachments/brief.bin"}}
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "researcher",
                            "arguments": {
                                "message": "check it",
                                "files": ["/attachments/brief.bin"],
                            },
                        }
                    ]
                },
                {"text": "got the file"},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "inspect_brief", "arguments": {"path": "/attachments/brief.bin"}}
                    ]
                },
                {
                    "tool_calls": [
                        {
                            "name": "report",
                            "arguments": {
                                "summary": "checked",
                                "files": ["/attachments/result.bin"],
                            },
                        }
                    ]
                },
            ]
        },
    )
    definitions = family(
        parent,
        child,
        subagent={"initAttachmentsProperty": "files"},
        parent_tools=[{"name": "researcher", "initAttachmentsProperty": "files"}, "write_brief"],
        extra=file_tools(),
    )
    definitions.prompts["researcher_prompt"].tools.append("inspect_brief")
    worker = await start_worker(definitions)
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    reference = state.children[0]["reference"]
    # Parent → child: the child's own copy, read by the child's tool.
    inspected = tool_result(worker.store, reference, "inspect_brief")
    assert inspected["result"] == {"same": True, "size": len(BRIEF)}
    assert worker.store.files.read_file(reference, "/attachments/brief.bin") == BRIEF
    [first] = [m for m in worker.store.messages.list(reference) if m.role == "user"]
    assert first.attachments == ["/attachments/brief.bin"]
    # Child → parent: a parent-local path in the tool result, holding the child's bytes.
    result = tool_result(worker.store, handle.id, "researcher")
    [path] = result["result"]["attachments"]
    assert worker.store.files.read_file(handle.id, path) == RESULT
    # Each side holds its own copy under its own path.
    assert worker.store.files.read_file(reference, "/attachments/result.bin") == RESULT
    assert worker.store.files.read_file(handle.id, "/attachments/brief.bin") == BRIEF


async def test_a_missing_attachment_is_a_tool_error_not_a_stuck_thread(
    start_worker, temporal_client, scripted_server
):
    """An attachment path that does not exist fails the tool call; no child is started."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {
                            "name": "researcher",
                            "arguments": {"message": "x", "files": ["/attachments/nope.txt"]},
                        }
                    ]
                },
                {"text": "ok"},
            ]
        },
    )
    child = add_script(scripted_server, {"replies": [{"text": "unused"}]})
    worker = await start_worker(
        family(parent, child, subagent={"initAttachmentsProperty": "files"}, extra=file_tools())
    )
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    result = tool_result(worker.store, handle.id, "researcher")
    assert result["error_code"] == "attachment_not_found" and "nope.txt" in result["error"]
    assert state.children == []


def test_definition_errors_name_the_file_and_field():
    """A subagent that is not exposed, or a misspelt config field, fails at start-up."""
    from weft.definitions import DefinitionError

    hidden = family("p", "c", child={"exposeAsTool": False})
    with pytest.raises(DefinitionError, match=r"tools\[0\].*set exposeAsTool: true"):
        hidden.validate()
    misspelt = family("p", "c", subagent={"blockin": False})
    with pytest.raises(DefinitionError, match=r"tools\[0\].*blockin"):
        misspelt.validate()
    reserved = family("p", "c", parent_tools=["subagent_create"])
    with pytest.raises(DefinitionError, match="added by the runtime"):
        reserved.validate()
