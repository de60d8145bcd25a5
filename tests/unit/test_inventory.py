"""The tool inventory and execution environment read models (workflows/inventory.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from unit_support import FixedContext, memory

from weft.contract.definitions import (
    AgentDef,
    DefinitionSnapshot,
    ModelDef,
    PromptDef,
    ToolRef,
    ToolSpec,
)
from weft.contract.mcp import McpServerCatalog, McpServerDef, McpToolSpec
from weft.contract.read_models import session_snapshot
from weft.contract.thread import ThreadStartInput
from weft.workflows import inventory, read_models
from weft.workflows.thread_state import ThreadMemory

SECRETS = ("sk-agent-secret-8d1f", "thread-secret-77aa", "prompt-secret-31c0")
SNAPSHOT_SCHEMA = (
    Path(__file__).resolve().parents[1] / "specs/agentruntime/agentruntime-snapshot.schema.json"
)


def _spec(name: str, **fields: Any) -> ToolSpec:
    return ToolSpec(name=name, description=f"{name} tool", parameters={}, **fields)


def _snapshot(*, permissions: dict[str, Any] | None = None) -> DefinitionSnapshot:
    """An agent whose prompt offers function, prompt, agent, MCP and built-in tools."""
    prompt = PromptDef.model_validate(
        {
            "name": "main",
            "toolDescription": "main",
            "prompt": "Hi.",
            "model": "m",
            "tools": [
                "weather",
                "note",
                "explode",
                "summarize",
                "ask_human",
                {"name": "researcher"},
                {"name": "auditor", "optional": "AUDIT_ON"},
                {"mcp": "files"},
            ],
            "env": {"REGION": {"value": "eu", "type": "text"}, "P_KEY": SECRETS[2]},
            "variables": [
                {"name": "API_TOKEN", "required": True},
                {"name": "MISSING_ONE", "required": True},
            ],
        }
    )
    child = {"type": "dual_ai", "sideA": {"prompt": "main"}, "sideB": {"prompt": "main"}}
    agent = {"name": "helper", "sideA": {"prompt": "main"}, "env": {"API_TOKEN": SECRETS[0]}}
    if permissions is not None:
        agent["permissions"] = permissions
    return DefinitionSnapshot(
        snapshot_id="snap_1",
        agent=AgentDef.model_validate(agent),
        agents={
            "researcher": AgentDef.model_validate({"name": "researcher", **child}),
            "auditor": AgentDef.model_validate({"name": "auditor", **child}),
        },
        prompts={"main": prompt},
        models={"m": ModelDef(name="m", provider="openai", model="gpt")},
        tools={
            "weather": _spec("weather"),
            "note": _spec("note"),
            "explode": _spec("explode"),
            "ask_human": _spec("ask_human", builtin=True),
            "summarize": _spec("summarize", builtin=True, kind="prompt", target="summary"),
            "researcher": _spec("researcher", builtin=True, kind="subagent", target="researcher"),
            "auditor": _spec("auditor", builtin=True, kind="subagent", target="auditor"),
        },
        mcp_servers={"files": McpServerDef(name="files", command="python", prefix="fs_")},
    )


POLICY = {
    "mode": "auto",
    "rules": [
        {"tool": "note", "decision": "ask"},
        {"tool": "explode", "decision": "deny", "reason": "never"},
        {"tool": "weather", "args": {"city": "Paris"}, "decision": "deny"},
    ],
}


def _memory(*, env: dict[str, Any] | None = None, **snapshot: Any) -> ThreadMemory:
    return ThreadMemory(
        thread_id="t1",
        start=ThreadStartInput.model_validate(
            {"agent": "helper", "env": env or {"USER_KEY": SECRETS[1]}}
        ),
        context=FixedContext(),
        snapshot=_snapshot(**snapshot),
    )


def _listed(mem: ThreadMemory) -> None:
    mem.mcp.resolved(
        {
            "files": McpServerCatalog(
                catalog_id="mcpcat_files_d1",
                server="files",
                status="ready",
                tools=[
                    McpToolSpec(name="fs_read", server="files", tool="read"),
                    McpToolSpec(name="fs_write", server="files", tool="write"),
                ],
                digest="d1",
                resolved_at="2026-11-23T12:00:00Z",
            )
        }
    )


def _by_name(mem: ThreadMemory) -> dict[str, Any]:
    found = inventory.tool_inventory(mem)
    return {t.name: t for t in found.tools}


def test_each_kind_of_tool_is_listed_with_its_source() -> None:
    """Function, prompt, agent, MCP and built-in tools each carry their kind and source."""
    mem = _memory(permissions=POLICY)
    _listed(mem)
    tools = _by_name(mem)
    assert [t for t in tools] == [
        "weather",
        "note",
        "explode",
        "summarize",
        "ask_human",
        "researcher",
        "auditor",
        "fs_read",
        "fs_write",
    ]
    kinds = {name: (t.kind, t.source.model_dump(exclude_none=True)) for name, t in tools.items()}
    assert kinds["weather"] == ("function", {"type": "definition"})
    assert kinds["summarize"] == ("prompt", {"type": "prompt", "prompt": "summary"})
    assert kinds["researcher"] == ("agent", {"type": "agent", "agent": "researcher"})
    assert kinds["ask_human"] == ("builtin", {"type": "runtime"})
    assert kinds["fs_read"] == ("mcp", {"type": "mcp", "server": "files", "tool": "read"})


def test_permissions_are_what_the_gate_decides() -> None:
    """Ask and deny rules, the mode's allow, argument rules beside, runtime tools exempt."""
    mem = _memory(permissions=POLICY)
    _listed(mem)
    tools = _by_name(mem)
    decided = {n: (t.permission.decision, t.permission.decided_by) for n, t in tools.items()}
    assert decided["note"] == ("ask", "rule")
    assert decided["explode"] == ("deny", "rule")
    assert decided["weather"] == ("allow", "mode")
    assert decided["fs_write"] == ("allow", "mode")
    assert decided["summarize"] == ("allow", "runtime")
    assert tools["explode"].permission.rule == {
        "origin": "agent",
        "index": 1,
        "tool": "explode",
        "args": {},
        "decision": "deny",
        "reason": "never",
    }
    assert [r["args"] for r in tools["weather"].permission.argument_rules] == [{"city": "Paris"}]
    mem.actions.session_allowed_tools.add("note")
    assert _by_name(mem)["note"].permission.decided_by == "session"
    assert inventory.tool_inventory(mem).mode == "auto"


def test_without_a_policy_every_call_is_allowed_and_says_so() -> None:
    """No agent or prompt policy: `no_policy`, not a guessed mode."""
    found = inventory.tool_inventory(_memory())
    assert found.mode == "no_policy"
    assert {t.permission.decided_by for t in found.tools if t.kind == "function"} == {"no_policy"}


def test_an_optional_agent_tool_is_listed_disabled_until_its_flag_is_on() -> None:
    """`optional: AUDIT_ON` off: listed, disabled, with the flag; on: enabled."""
    off = _by_name(_memory())["auditor"]
    assert (off.enabled, off.optional) == (False, "AUDIT_ON")
    assert off.disabled_reason is not None and "AUDIT_ON" in off.disabled_reason
    assert _by_name(_memory())["researcher"].enabled
    on = _by_name(_memory(env={"AUDIT_ON": {"value": "yes", "type": "text"}}))["auditor"]
    assert (on.enabled, on.optional, on.disabled_reason) == (True, "AUDIT_ON", None)
    assert list(_by_name(_memory())).count("auditor") == 1


def test_an_mcp_server_not_listed_yet_is_unknown_not_empty() -> None:
    """Before its first listing a server is `not_listed` and named in `unknown`."""
    mem = _memory()
    found = inventory.tool_inventory(mem)
    assert [(s.server, s.status) for s in found.mcp_servers] == [("files", "not_listed")]
    assert any(u.startswith("mcpServers.files") for u in found.unknown)
    _listed(mem)
    listed = inventory.tool_inventory(mem)
    assert [(s.server, s.status, s.tools) for s in listed.mcp_servers] == [("files", "ready", 2)]
    assert listed.unknown == []
    assert listed.inventory_ref != found.inventory_ref
    assert inventory.tool_inventory(mem).inventory_ref == listed.inventory_ref


def test_env_is_named_by_layer_and_no_secret_value_appears() -> None:
    """Env names with type and winning layer; no value of any layer in either snapshot."""
    mem = _memory(permissions=POLICY)
    env = inventory.execution_environment(mem)
    assert [(v.name, v.type, v.layer) for v in env.env] == [
        ("API_TOKEN", "secret", "agent"),
        ("P_KEY", "secret", "prompt"),
        ("REGION", "text", "prompt"),
        ("USER_KEY", "secret", "thread"),
    ]
    assert [v.name for v in env.env if v.required] == ["API_TOKEN"]
    assert env.missing_variables == ["MISSING_ONE"]
    texts = json.dumps(env.model_dump(mode="json")) + json.dumps(
        inventory.tool_inventory(mem).model_dump(mode="json")
    )
    for value in SECRETS:
        assert value not in texts
    assert '"eu"' not in texts  # a text value is not shown either: names only


def test_environment_is_honest_about_running_code() -> None:
    """runCode is `unknown` with a reason; open tool calls and the filesystem root are shown."""
    mem = _memory()
    mem.open_calls.waiting = {"call_2", "call_1"}
    env = inventory.execution_environment(mem)
    assert env.processes["runCode"]["status"] == "unknown"
    assert env.processes["toolCallsAwaitingResults"] == ["call_1", "call_2"]
    assert env.limits["runCode"]["status"] == "unknown"
    assert env.limits["maxTotalSteps"] == 64
    assert env.workspace_roots[0]["root"] == "/" and env.cwd is None


def test_a_preparing_thread_says_its_tools_are_not_known() -> None:
    """Before thread.init there is no snapshot: no tools, and `unknown` says why."""
    mem = memory(loaded=False)
    assert inventory.tool_inventory(mem).unknown == [inventory.NOT_LOADED]
    assert inventory.tool_inventory(mem).tools == []
    assert any("not loaded" in u for u in inventory.execution_environment(mem).unknown)


def test_both_fit_the_session_snapshot_schema() -> None:
    """The ref is the schema's `toolInventoryRef`, the environment its `executionEnvironment`."""
    mem = _memory(permissions=POLICY)
    session = session_snapshot(
        read_models.thread_read(mem), [], older_cursor=None, total_messages=0
    )
    session["toolInventoryRef"] = inventory.tool_inventory(mem).inventory_ref
    session["executionEnvironment"] = inventory.execution_environment(mem).model_dump(
        mode="json", by_alias=True
    )
    schema = json.loads(SNAPSHOT_SCHEMA.read_text())
    jsonschema.Draft202012Validator(schema).validate(session)
    session["toolInventoryRef"] = {"not": "a string"}
    assert list(jsonschema.Draft202012Validator(schema).iter_errors(session))


def test_the_close_writes_both_snapshots_as_events() -> None:
    """`emit_snapshots` puts both in the outbox as `snapshot.updated` of their kinds."""
    mem = _memory()
    inventory.emit_snapshots(mem)
    kinds = [(e.type, e.payload["kind"]) for e in mem.outbox]
    assert kinds == [
        ("snapshot.updated", "tool_inventory"),
        ("snapshot.updated", "execution_environment"),
    ]
    assert mem.outbox[0].payload["toolInventory"]["threadId"] == "t1"
    assert "env" in mem.outbox[1].payload["executionEnvironment"]


def test_resumable_subagents_are_reached_through_the_runtime_agent_tools() -> None:
    """A resumable subagent is offered as `subagent_create` / `subagent_message`, kind agent."""
    mem = _memory()
    assert mem.snapshot is not None
    prompt = mem.snapshot.prompts["main"]
    tools = [
        ToolRef.model_validate({"name": "researcher", "resumable": True})
        if getattr(t, "name", None) == "researcher"
        else t
        for t in prompt.tools
    ]
    extra = {
        name: _spec(name, builtin=True, kind=name)
        for name in ("subagent_create", "subagent_message")
    }
    mem.snapshot = mem.snapshot.model_copy(
        update={
            "prompts": {"main": prompt.model_copy(update={"tools": tools})},
            "tools": {**mem.snapshot.tools, **extra},
        }
    )
    found = _by_name(mem)
    assert "researcher" not in found
    assert [(found[n].kind, found[n].source.type) for n in extra] == [("agent", "runtime")] * 2
