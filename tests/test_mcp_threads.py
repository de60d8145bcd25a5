"""MCP tools in real threads: a real dev server, real MCP servers (stdio and streamable HTTP,
tests/mcp_servers/tools_server.py) and the scripted model.

The catalogue is listed once and replayed from history, a `list_changed` or a refresh lists
it again, calls pass the permission policy, a dead session is opened again, a server that
will not start leaves the thread working (and the model told), and an elicitation is a
human action answered with `respond_action`.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Any

import pytest
from mcp_support import http_server, http_server_def, server_children, stdio_server, wait_gone
from support import (
    add_script,
    agent_definitions,
    assert_every_run_replays,
    event_schema_validator,
    idle_after,
    read,
    start_thread,
    stored_events,
    wait_until,
)
from temporalio.client import WorkflowUpdateFailedError

from weft.contract.events import Event
from weft.contract.mcp import McpServerDef
from weft.workers.agent_worker import AgentWorker


def _definitions(script: str, *servers: McpServerDef, tools: list[Any], **agent: Any) -> Any:
    definitions = agent_definitions(script, tools=["weather", *tools], **agent)
    return definitions.add(*servers)


def _events(worker: AgentWorker, thread_id: str, *types: str) -> list[Event]:
    return stored_events(worker, thread_id, *types)


def _tool_results(worker: Any, thread_id: str) -> list[str]:
    return [m.content for m in worker.store.messages.list(thread_id) if m.role == "tool"]


def _requests(scripted_server: Any, script: str) -> list[dict[str, Any]]:
    return [r for r in scripted_server.requests if r["model"] == script]


def _offered(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request["tools"]]


def _system(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def test_a_stdio_catalogue_is_listed_once_and_replays_without_the_server(
    start_worker, temporal_client, scripted_server
):
    """Two turns use a stdio server's tools: one `tool.catalog.resolved`, results stored, and
    a fresh worker that must replay the thread lists nothing and starts no server."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "add",
                    "replies": [
                        {"tool_calls": [{"name": "t_add", "arguments": {"a": 2, "b": 3}}]},
                        {"text": "It is 5."},
                    ],
                },
                {
                    "match": "echo",
                    "replies": [
                        {"tool_calls": [{"name": "t_echo", "arguments": {"text": "hi"}}]},
                        {"text": "Echoed."},
                    ],
                },
                {"match": "*", "replies": [{"text": "Nothing to do."}]},
            ]
        },
    )
    server = stdio_server("tools", prefix="t_", allow=["add", "echo"])
    definitions = _definitions(script, server, tools=[{"mcp": "tools"}])
    worker = await start_worker(definitions)
    handle = await start_thread(temporal_client, worker.task_queue, messages=_user("add them"))
    await wait_until(handle, idle_after(1))
    await handle.signal("queue_message", {"role": "user", "content": "now echo"})
    await wait_until(handle, idle_after(2))

    resolved = _events(worker, handle.id, "tool.catalog.resolved")
    assert len(resolved) == 1
    listed = resolved[0].payload["servers"]["tools"]
    assert (listed["status"], listed["tools"]) == ("ready", ["t_add", "t_echo"])
    assert resolved[0].payload["reason"] == "prompt_active"
    results = _tool_results(worker, handle.id)
    assert '"result":"5"' in results[0] and '"result":"hi"' in results[1]
    requests = _requests(scripted_server, script)
    assert all(_offered(r)[:3] == ["weather", "t_add", "t_echo"] for r in requests)
    validator = event_schema_validator()
    for event in _events(worker, handle.id):
        validator.validate(event.model_dump(mode="json", by_alias=True, exclude_none=True))
    await assert_every_run_replays(temporal_client, handle)

    # The first worker goes, and its sessions with it. A worker with no workflow cache
    # replays the whole history for every task: the catalogue comes from history.
    await worker.__aexit__(None, None, None)
    assert server_children() == []
    again = await start_worker(definitions, task_queue=worker.task_queue, max_cached_workflows=0)
    await handle.signal("queue_message", {"role": "user", "content": "thanks"})
    state = await wait_until(handle, idle_after(3))
    assert state.stop_reason == "stop_on_response"
    assert len(_events(again, handle.id, "tool.catalog.resolved")) == 1
    assert server_children() == []  # nothing was listed, so no server was started
    assert _offered(_requests(scripted_server, script)[-1])[:3] == ["weather", "t_add", "t_echo"]
    await handle.signal("terminate", {})


async def test_a_streamable_http_server_serves_single_tools(
    start_worker, temporal_client, scripted_server
):
    """`server.tool` entries offer one tool each of an HTTP server; a tool whose name one of
    the prompt's own tools has is skipped with a warning, and a server-side error is an
    error result the model reads."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
                {"tool_calls": [{"name": "fail", "arguments": {"message": "no luck"}}]},
                {"text": "Done."},
            ]
        },
    )
    with http_server() as mcp:
        server = http_server_def(mcp.url, name="remote")
        definitions = _definitions(script, server, tools=["remote.weather", "remote.fail"])
        worker = await start_worker(definitions)
        handle = await start_thread(temporal_client, worker.task_queue, messages=_user("go"))
        await wait_until(handle, idle_after(1))
    resolved = _events(worker, handle.id, "tool.catalog.resolved")[0].payload
    listed = resolved["servers"]["remote"]["tools"]  # the server's whole catalogue
    assert "fail" in listed and "weather" not in listed
    warnings = [e.payload for e in _events(worker, handle.id, "runtime.warning")]
    assert [w["code"] for w in warnings] == ["mcp_tool_skipped"]
    assert "'weather'" in warnings[0]["message"] and "remote" in warnings[0]["message"]
    offered = _offered(_requests(scripted_server, script)[0])
    assert offered.count("weather") == 1 and "fail" in offered
    own, failed = _tool_results(worker, handle.id)
    assert '"status":"success"' in own  # the prompt's function tool, not the server's
    assert '"error_code":"mcp_tool_error"' in failed and "no luck" in failed
    await handle.signal("terminate", {})


async def test_list_changed_and_refresh_list_the_catalogue_again(
    start_worker, temporal_client, scripted_server
):
    """A call that makes the server report `list_changed` lists it again before the next
    model call, which offers the new tool; `refresh_tools` lists it again too."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "grow",
                    "replies": [
                        {"tool_calls": [{"name": "add_tool", "arguments": {"name": "shiny"}}]},
                        {"tool_calls": [{"name": "shiny", "arguments": {}}]},
                        {"text": "Grown."},
                    ],
                },
                {"match": "*", "replies": [{"text": "Refreshed."}]},
            ]
        },
    )
    worker = await start_worker(_definitions(script, stdio_server(), tools=[{"mcp": "tools"}]))
    handle = await start_thread(temporal_client, worker.task_queue, messages=_user("grow"))
    await wait_until(handle, idle_after(1))
    reasons = [e.payload["reason"] for e in _events(worker, handle.id, "tool.catalog.resolved")]
    assert reasons == ["prompt_active", "list_changed"]
    first, second, _ = _requests(scripted_server, script)
    assert "shiny" not in _offered(first) and "shiny" in _offered(second)
    assert "shiny was added at run time" in _tool_results(worker, handle.id)[1]

    await handle.signal("refresh_tools", {"servers": ["tools"]})
    await handle.signal("refresh_tools", {"servers": ["nope"]})
    await handle.signal("refresh_tools", {"servers": "tools"})  # not a list
    await handle.signal("mcp_elicitation", {"actionId": "a1"})  # not an elicitation
    await handle.signal("queue_message", {"role": "user", "content": "again"})
    await wait_until(handle, idle_after(2))
    reasons = [e.payload["reason"] for e in _events(worker, handle.id, "tool.catalog.resolved")]
    assert reasons == ["prompt_active", "list_changed", "refresh"]
    warnings = [e.payload for e in _events(worker, handle.id, "runtime.warning")]
    unknown = [w for w in warnings if w["code"] == "unknown_mcp_server"]
    assert len(unknown) == 1 and "'nope'" in unknown[0]["message"]
    malformed = [w for w in warnings if w["code"] == "malformed_signal"]
    assert [w["signal"] for w in malformed] == ["refresh_tools", "mcp_elicitation"]
    assert "servers" in malformed[0]["message"] and "toolCallId" in malformed[1]["message"]
    await assert_every_run_replays(temporal_client, handle)
    await handle.signal("terminate", {})


async def test_a_permission_ask_guards_an_mcp_tool(start_worker, temporal_client, scripted_server):
    """An `ask` rule on the model's name of an MCP tool waits for a person; approved, it runs."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "t_add", "arguments": {"a": 1, "b": 1}}]},
                {"text": "Two."},
            ]
        },
    )
    policy = {"mode": "auto", "rules": [{"tool": "t_*", "decision": "ask"}]}
    definitions = _definitions(
        script, stdio_server(prefix="t_"), tools=[{"mcp": "tools"}], permissions=policy
    )
    worker = await start_worker(definitions)
    handle = await start_thread(temporal_client, worker.task_queue, messages=_user("sum"))
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    action = state.pending_actions[0]
    assert (action["kind"], action["toolName"], state.status) == (
        "tool_permission",
        "t_add",
        "waiting_permission",
    )
    await handle.signal("respond_action", {"actionId": action["actionId"], "decision": "approve"})
    await wait_until(handle, idle_after(1))
    assert '"result":"2"' in _tool_results(worker, handle.id)[0]
    await handle.signal("terminate", {})


async def test_a_killed_stdio_server_is_started_again_on_the_next_call(
    start_worker, temporal_client, scripted_server
):
    """The server process dies between two calls: the second call starts a new one."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "first",
                    "replies": [{"tool_calls": [{"name": "pid", "arguments": {}}]}, {"text": "A"}],
                },
                {
                    "match": "*",
                    "replies": [{"tool_calls": [{"name": "pid", "arguments": {}}]}, {"text": "B"}],
                },
            ]
        },
    )
    worker = await start_worker(_definitions(script, stdio_server(), tools=["tools.pid"]))
    handle = await start_thread(temporal_client, worker.task_queue, messages=_user("first"))
    await wait_until(handle, idle_after(1))
    first_pid = int(_tool_results(worker, handle.id)[0].split('"result":"')[1].split('"')[0])
    os.kill(first_pid, signal.SIGKILL)
    # SIGKILL is delivered asynchronously: a process not yet exited still takes the next
    # request into its pipe, and a call sent then is honestly lost mid-call. Exited (and
    # reaped), its pipe is closed, which the worker's session sees before any new call.
    assert await asyncio.to_thread(wait_gone, first_pid, 10.0)
    await handle.signal("queue_message", {"role": "user", "content": "second"})
    await wait_until(handle, idle_after(2))
    second = _tool_results(worker, handle.id)[1]
    assert '"status":"success"' in second and f'"result":"{first_pid}"' not in second
    await handle.signal("terminate", {})


async def test_a_server_that_will_not_start_leaves_the_thread_working(
    start_worker, temporal_client, scripted_server
):
    """The catalogue records the failure with a warning naming the server, the model is told
    in its system prompt, and the turn is answered."""
    script = add_script(scripted_server, {"replies": [{"text": "I will manage without."}]})
    broken = stdio_server("flaky", args=["--mode", "exit"], startup_timeout_seconds=5)
    worker = await start_worker(_definitions(script, broken, tools=[{"mcp": "flaky"}]))
    handle = await start_thread(temporal_client, worker.task_queue, messages=_user("hello"))
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    resolved = _events(worker, handle.id, "tool.catalog.resolved")[0].payload["servers"]["flaky"]
    assert resolved["status"] == "failed" and "flaky" in resolved["error"]
    warnings = [e.payload for e in _events(worker, handle.id, "runtime.warning")]
    assert [w["code"] for w in warnings] == ["mcp_server_unavailable"]
    request = _requests(scripted_server, script)[0]
    assert "MCP server 'flaky'" in _system(request)
    assert _offered(request) == ["weather"]
    await handle.signal("terminate", {})


async def test_an_elicitation_is_answered_with_respond_action(
    start_worker, temporal_client, scripted_server
):
    """A server asks a person mid-call: an `elicitation` action, an answer that does not fit
    refused by name, then the person's answer reaches the server and the tool result."""
    script = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "ask_name", "arguments": {}}]}, {"text": "Hi."}]},
    )
    worker = await start_worker(_definitions(script, stdio_server(), tools=["tools.ask_name"]))
    handle = await start_thread(temporal_client, worker.task_queue, messages=_user("greet me"))
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    action = state.pending_actions[0]
    assert (action["kind"], action["toolName"], state.status) == (
        "elicitation",
        "ask_name",
        "waiting_input",
    )
    assert action["prompt"] == "What is your name?"
    assert action["args"]["server"] == "tools"
    assert action["args"]["requestedSchema"]["required"] == ["name"]
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(
            "respond_action_checked",
            {"actionId": action["actionId"], "decision": "answer", "answer": {"nom": "Ada"}},
        )
    assert "'name' is required" in str(refused.value.cause)
    await handle.execute_update(
        "respond_action_checked",
        {"actionId": action["actionId"], "decision": "answer", "answer": {"name": "Ada"}},
    )
    await wait_until(handle, idle_after(1))
    assert '"result":"Hello, Ada!"' in _tool_results(worker, handle.id)[0]
    required = _events(worker, handle.id, "action.required")[0].payload
    assert (required["actionType"], required["decisionKind"]) == ("elicitation", "answer")
    resolved = _events(worker, handle.id, "action.resolved")[0].payload
    assert (resolved["decision"], resolved["answer"]) == ("answer", {"name": "Ada"})
    assert (await read(handle)).pending_actions == []
    await handle.signal("terminate", {})


async def test_an_unanswered_elicitation_times_out_as_cancel(
    start_worker, temporal_client, scripted_server
):
    """`elicitationTimeoutSeconds` expires on a durable timer and the server is told cancel."""
    script = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "ask_name", "arguments": {}}]}, {"text": "Ok."}]},
    )
    server = stdio_server(elicitation_timeout_seconds=1)
    worker = await start_worker(_definitions(script, server, tools=["tools.ask_name"]))
    handle = await start_thread(temporal_client, worker.task_queue, messages=_user("greet me"))
    await wait_until(handle, idle_after(1))
    assert '"result":"cancelled"' in _tool_results(worker, handle.id)[0]
    resolved = _events(worker, handle.id, "action.resolved")[0].payload
    assert (resolved["decidedBy"], resolved["timedOut"]) == ("timeout", True)
    await handle.signal("terminate", {})
