"""The agent in force: resolved once per snapshot and running agent, handed down whole."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError
from unit_support import memory, snapshot

from weft.contract.context import ContextReport
from weft.contract.context_state import ContextState
from weft.contract.definitions import AgentDef, DefinitionSnapshot, ModelDef, PromptDef
from weft.contract.mcp import McpRef, McpServerDef
from weft.workflows.active_agent import ActiveAgent


def handoff_snapshot() -> DefinitionSnapshot:
    """`helper` (prompt `p` on `m`) may hand off to `expert` (prompt `q` on `big`)."""
    base = snapshot()
    return base.model_copy(
        update={
            "agents": {
                "expert": AgentDef.model_validate({"name": "expert", "sideA": {"prompt": "q"}})
            },
            "prompts": {
                **base.prompts,
                "q": PromptDef(name="q", tool_description="knows", prompt="Hm.", model="big"),
            },
            "models": {**base.models, "big": ModelDef(name="big", provider="openai", model="o")},
        }
    )


def test_the_side_is_resolved_once_and_kept_while_nothing_changes() -> None:
    mem = memory()
    agents = ActiveAgent(mem)
    first = agents.in_force("a")
    assert (first.agent.name, first.side.prompt, first.prompt.name, first.model.name) == (
        "helper",
        "p",
        "p",
        "m",
    )
    assert first.snapshot is mem.snapshot
    # The same value, not a new lookup: what each part asks within a step.
    assert agents.in_force("a") is first
    assert agents.prompt("a") is first.prompt
    assert agents.agent() is first.agent


def test_a_move_to_newer_definitions_resolves_again() -> None:
    mem = memory()
    agents = ActiveAgent(mem)
    before = agents.in_force("a")
    newer = snapshot().model_copy(
        update={
            "prompts": {"p": PromptDef(name="p", tool_description="new", prompt="Yo.", model="m")}
        }
    )
    mem.use_definitions(newer)
    after = agents.in_force("a")
    assert after is not before
    assert after.snapshot is newer
    assert after.prompt.tool_description == "new"


def test_a_handoff_resolves_the_target_agent() -> None:
    mem = memory()
    mem.use_definitions(handoff_snapshot())
    agents = ActiveAgent(mem)
    assert agents.in_force("a").agent.name == "helper"
    mem.active_agent = "expert"
    target = agents.in_force("a")
    assert (target.agent.name, target.prompt.name, target.model.name) == ("expert", "q", "big")
    mem.active_agent = None  # handed back
    assert agents.in_force("a").agent.name == "helper"


def test_the_mcp_servers_the_prompt_uses_are_resolved_with_it() -> None:
    mem = memory()
    base = snapshot()
    prompt = base.prompts["p"].model_copy(update={"tools": [McpRef(mcp="docs")]})
    server = McpServerDef.model_validate({"name": "docs", "command": "docs-server"})
    mem.use_definitions(
        base.model_copy(update={"prompts": {"p": prompt}, "mcp_servers": {"docs": server}})
    )
    assert ActiveAgent(mem).in_force("a").mcp_servers == ("docs",)
    assert ActiveAgent(memory()).in_force("a").mcp_servers == ()


def test_unloaded_definitions_are_refused_by_name() -> None:
    with pytest.raises(ApplicationError, match="not loaded yet"):
        ActiveAgent(memory(loaded=False)).in_force("a")


def test_the_compaction_due_before_a_call_is_one_answer() -> None:
    model = ModelDef.model_validate(
        {
            "name": "m",
            "provider": "openai",
            "model": "gpt",
            "capabilities": {"maxContextTokens": 8192, "maxOutputTokens": 512},
        }
    )
    state = ContextState()
    state.observe(ContextReport(request_tokens=100, request_bytes=1, prompt_budget=6_860))
    assert state.compaction_due(model) is None
    state.observe(ContextReport(request_tokens=7_000, request_bytes=1, prompt_budget=6_860))
    assert state.compaction_due(model) == "budget"
    state.requested = "tool"  # an asked compaction says why, over budget or not
    assert state.compaction_due(model) == "tool"
