"""Tool permission policies: rules and modes, human approvals by scope, and timeouts."""

from __future__ import annotations

from typing import Any

import pytest
from support import add_script, agent_definitions, idle_after, read, start_thread, wait_until
from temporalio.client import WorkflowUpdateFailedError

WEATHER_TWICE = {
    "replies": [
        {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
        {"tool_calls": [{"name": "weather", "arguments": {"city": "Paris"}}]},
        {"text": "Both forecasts are in."},
    ]
}


def _events(worker: Any, thread_id: str, *types: str) -> list[dict[str, Any]]:
    events = worker.store.events.read(thread_id, limit=10_000)
    return [e.to_wire() for e in events if not types or e.type in types]


def _tool_results(worker: Any, thread_id: str) -> list[str]:
    return [m.content for m in worker.store.messages.list(thread_id) if m.role == "tool"]


async def test_deny_rule_overrides_auto_allow(start_worker, temporal_client, scripted_server):
    """In auto mode a deny rule on an argument pattern still denies; the loop continues."""
    script = add_script(scripted_server, WEATHER_TWICE)
    policy = {
        "mode": "auto",
        "rules": [{"tool": "weath*", "args": {"city": "Par*"}, "decision": "deny", "reason": "no"}],
    }
    worker = await start_worker(agent_definitions(script, permissions=policy))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    oslo, paris = _tool_results(worker, handle.id)
    assert '"status":"success"' in oslo
    assert "permission denied for weather by agent rule 0: no" in paris
    assert '"error_code":"permission_denied"' in paris
    evaluated = [e["payload"] for e in _events(worker, handle.id, "permission.evaluated")]
    assert [(p["decision"], p["decidedBy"]) for p in evaluated] == [
        ("allow", "mode"),
        ("deny", "rule"),
    ]
    assert not _events(worker, handle.id, "action.required")
    await handle.signal("terminate", {})


async def test_session_scoped_approval_stops_further_asks(
    start_worker, temporal_client, scripted_server
):
    """Approving with scope session runs the tool and never asks about it again."""
    script = add_script(scripted_server, WEATHER_TWICE)
    policy = {"mode": "auto", "rules": [{"tool": "weather", "decision": "ask"}]}
    worker = await start_worker(agent_definitions(script, permissions=policy))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    state = await wait_until(handle, lambda s: bool(s.pending_actions))
    assert state.status == "waiting_permission"
    action = state.pending_actions[0]
    assert (action["kind"], action["toolName"]) == ("tool_permission", "weather")
    result = await handle.execute_update(
        "respond_action_checked",
        {"actionId": action["actionId"], "decision": "approve", "scope": "session"},
    )
    assert result == {"actionId": action["actionId"], "status": "resolved", "decision": "approve"}
    state = await wait_until(handle, idle_after(1))
    assert state.permission_state["sessionAllowedTools"] == ["weather"]
    assert all('"status":"success"' in r for r in _tool_results(worker, handle.id))
    assert len(_events(worker, handle.id, "action.required")) == 1
    evaluated = [
        e["payload"]["decidedBy"] for e in _events(worker, handle.id, "permission.evaluated")
    ]
    assert evaluated == ["rule", "session"]
    resolved = _events(worker, handle.id, "permission.resolved")
    assert [(e["payload"]["decidedBy"], e["payload"]["scope"]) for e in resolved] == [
        ("human", "session")
    ]
    await handle.signal("terminate", {})


async def test_once_approval_asks_again_and_human_deny_continues(
    start_worker, temporal_client, scripted_server
):
    """A once approval covers one call; the next call asks again, and a deny is an error result."""
    script = add_script(scripted_server, WEATHER_TWICE)
    worker = await start_worker(agent_definitions(script, permissions={"mode": "default"}))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    first = (await wait_until(handle, lambda s: bool(s.pending_actions))).pending_actions[0]
    await handle.signal("respond_action", {"actionId": first["actionId"], "decision": "approve"})
    second = (
        await wait_until(
            handle,
            lambda s: bool(s.pending_actions) and s.pending_actions[0] != first,
        )
    ).pending_actions[0]
    await handle.signal(
        "respond_action",
        {"actionId": second["actionId"], "decision": "deny", "reason": "not Paris"},
    )
    await wait_until(handle, idle_after(1))
    oslo, paris = _tool_results(worker, handle.id)
    assert '"status":"success"' in oslo
    assert "permission denied by a human: not Paris" in paris
    with pytest.raises(WorkflowUpdateFailedError) as failed:
        await handle.execute_update(
            "respond_action_checked", {"actionId": first["actionId"], "decision": "approve"}
        )
    assert "already resolved" in str(failed.value.cause)
    await handle.signal("terminate", {})


async def test_permission_request_times_out_as_denied(
    start_worker, temporal_client, scripted_server
):
    """An unanswered permission request expires on its durable timer and is denied."""
    script = add_script(
        scripted_server, {"replies": WEATHER_TWICE["replies"][:1] + [{"text": "ok"}]}
    )
    policy = {"mode": "default", "askTimeoutSeconds": 1, "onTimeout": "deny"}
    worker = await start_worker(agent_definitions(script, permissions=policy))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    pending = (await wait_until(handle, lambda s: bool(s.pending_actions))).pending_actions[0]
    assert pending["timeoutSeconds"] == 1 and pending["onTimeout"] == "deny"
    await wait_until(handle, idle_after(1))
    (result,) = _tool_results(worker, handle.id)
    assert "nobody answered within 1.0 s" in result
    (resolved,) = _events(worker, handle.id, "action.resolved")
    assert resolved["payload"]["decidedBy"] == "timeout" and resolved["payload"]["timedOut"]
    (permission,) = _events(worker, handle.id, "permission.resolved")
    assert permission["payload"]["decidedBy"] == "timeout"
    state = await read(handle)
    assert [i["code"] for i in state.incidents] == ["action_timeout"]
    history = await handle.fetch_history()
    assert any(e.HasField("timer_fired_event_attributes") for e in history.events)
    await handle.signal("terminate", {})


async def test_plan_mode_denies_without_an_allow_rule(
    start_worker, temporal_client, scripted_server
):
    """Plan mode runs only tools an allow rule names; the rest are denied by the mode."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "weather", "arguments": {"city": "Oslo"}},
                        {"name": "note", "arguments": {"text": "x"}},
                    ]
                },
                {"text": "planned"},
            ]
        },
    )
    policy = {"mode": "plan", "rules": [{"tool": "weather", "decision": "allow"}]}
    worker = await start_worker(agent_definitions(script, permissions=policy))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, idle_after(1))
    weather, note = _tool_results(worker, handle.id)
    assert '"status":"success"' in weather
    assert "mode 'plan' runs no tool without an allow rule" in note
    assert worker.store.values.get(handle.id, "notes") is None
    await handle.signal("terminate", {})


@pytest.mark.parametrize(
    ("agent_extra", "prompt_tools", "fragment"),
    [
        ("permissions: {mode: yolo}", "[weather]", "field 'permissions.mode'"),
        (
            "permissions: {rules: [{tool: weather, decision: maybe}]}",
            "[weather]",
            "field 'permissions.rules.0.decision'",
        ),
        ("permissions: {askTimeoutSeconds: 0}", "[weather]", "permissions.askTimeoutSeconds"),
        (
            "",
            "[{name: ask_human, options: {timeoutSeconds: -1}}]",
            "tools[0].options: field 'timeoutSeconds'",
        ),
    ],
)
def test_bad_policies_fail_naming_the_field(tmp_path, agent_extra, prompt_tools, fragment):
    """A malformed permission policy or ask_human option fails at load, naming the field."""
    from weft.definitions import DefinitionError, load_directory

    for folder in ("models", "prompts", "agents", "tools"):
        (tmp_path / folder).mkdir()
    (tmp_path / "models" / "m.yaml").write_text("provider: scripted\nmodel: x\n")
    (tmp_path / "prompts" / "p.yaml").write_text(
        f"toolDescription: t\nmodel: m\nprompt: hi\ntools: {prompt_tools}\n"
    )
    (tmp_path / "agents" / "a.yaml").write_text(f"sideA: {{prompt: p}}\n{agent_extra}\n")
    (tmp_path / "tools" / "weather.py").write_text(
        "from support import CityArgs, weather\n"
        "from weft.definitions import define_tool\n"
        "tool = define_tool(description='w', args=CityArgs, execute=weather)\n"
    )
    with pytest.raises(DefinitionError) as failed:
        load_directory(tmp_path).validate()
    assert fragment in str(failed.value)
