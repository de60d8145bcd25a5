"""Shared by the inventory read-model tests: an agent with every kind of tool, and checks of
its tool inventory and execution environment as JSON."""

from __future__ import annotations

import json
from typing import Any

from mcp_support import stdio_server
from support import agent_definitions

from weft.definitions import Definitions, define_agent, define_model, define_prompt

SECRET = "sk-inventory-secret-5f1e9a"
POLICY = {
    "mode": "auto",
    "rules": [
        {"tool": "note", "decision": "ask"},
        {"tool": "explode", "decision": "deny", "reason": "never"},
    ],
}
MAIN_TOOLS: list[Any] = [
    "weather",
    "note",
    "explode",
    "advisor",
    {"name": "researcher"},
    {"name": "auditor", "optional": "AUDIT_ON"},
    {"mcp": "tools"},
]


def _child(name: str) -> Any:
    return define_agent(
        name=name,
        type="dual_ai",
        exposeAsTool=True,
        toolDescription=f"The {name}.",
        sideA={"prompt": "advisor"},
        sideB={"prompt": "advisor"},
    )


def definitions(script: str) -> Definitions:
    """`helper` with every kind of tool, a permission policy and a stdio MCP server."""
    return agent_definitions(script, tools=MAIN_TOOLS, permissions=POLICY).add(
        define_model(name="advisor_model", provider="scripted", model=script),
        define_prompt(
            name="advisor",
            toolDescription="Asks the advisor.",
            model="advisor_model",
            prompt="You are the advisor.",
            tools=["weather"],
        ),
        _child("researcher"),
        _child("auditor"),
        stdio_server("tools", prefix="t_", allow=["add", "echo"]),
    )


def check_inventory(found: dict[str, Any], source: str) -> None:
    """Every kind of tool, its permission and enabled flag, as the thread sees them."""
    tools = {t["name"]: t for t in found["tools"]}
    kinds = {name: t["kind"] for name, t in tools.items()}
    assert kinds == {
        "weather": "function",
        "note": "function",
        "explode": "function",
        "advisor": "prompt",
        "researcher": "agent",
        "auditor": "agent",
        "t_add": "mcp",
        "t_echo": "mcp",
    }, kinds
    decisions = {
        n: (t["permission"]["decision"], t["permission"]["decidedBy"]) for n, t in tools.items()
    }
    assert decisions["note"] == ("ask", "rule")
    assert decisions["explode"] == ("deny", "rule")
    assert decisions["weather"] == decisions["t_add"] == ("allow", "mode")
    assert decisions["advisor"] == decisions["researcher"] == ("allow", "runtime")
    assert tools["auditor"]["enabled"] is False and tools["auditor"]["optional"] == "AUDIT_ON"
    assert all(t["enabled"] for n, t in tools.items() if n != "auditor")
    echo = tools["t_echo"]["source"]
    assert (echo["type"], echo["server"], echo["tool"]) == ("mcp", "tools", "echo")
    assert tools["advisor"]["source"]["prompt"] == "advisor"
    assert [(s["server"], s["status"]) for s in found["mcpServers"]] == [("tools", "ready")]
    assert found["mode"] == "auto" and found["source"] == source
    assert found["inventoryRef"].startswith("toolinv_")
    assert SECRET not in json.dumps(found)


def check_environment(found: dict[str, Any], source: str) -> None:
    """Env by name and layer, the thread's filesystem, and running code honestly unknown."""
    assert {(v["name"], v["type"], v["layer"]) for v in found["env"]} == {
        ("API_TOKEN", "secret", "thread")
    }
    assert found["workspaceRoots"][0]["root"] == "/"
    assert found["processes"]["runCode"]["status"] == "unknown"
    assert found["source"] == source
    assert SECRET not in json.dumps(found)
