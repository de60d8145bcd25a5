"""Freezing what one agent needs into a content-addressed `DefinitionSnapshot`.

A thread keeps its snapshot for life: its prompts (with includes and the prompts it runs
as prompt tools), models (with fallbacks), tool specs, the agents it hands off to or runs
as subagents, and the MCP servers its prompts use (whose tools are not frozen here: the
`tool.catalog` activity lists them when a prompt becomes active).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from weft.contract.actions import ASK_HUMAN_TOOL
from weft.contract.definitions import (
    AgentDef,
    DefinitionSnapshot,
    EffectSpec,
    ModelDef,
    PromptDef,
    ToolSpec,
)
from weft.contract.hooks import HookSpec
from weft.contract.mcp import McpServerDef, servers_of
from weft.contract.task_tools import TASKS_TOOL, task_tool_specs
from weft.contract.tool_catalog import tool_entry
from weft.definitions.errors import DefinitionError, known_names
from weft.definitions.prompt_tool_checks import prompt_tool_config
from weft.definitions.tables import DefinitionTables
from weft.definitions.tool_specs import (
    agent_tool_spec,
    ask_human_spec,
    lifecycle_specs,
    prompt_tool_spec,
    resumable_subagent_specs,
)


def build_snapshot(definitions: DefinitionTables, agent_name: str) -> DefinitionSnapshot:
    """Freeze what `agent_name` needs: its prompts, models (with fallbacks) and tools."""
    agent = definitions.agents.get(agent_name)
    if agent is None:
        raise DefinitionError(
            f"agent {agent_name!r}",
            None,
            f"unknown agent; known agents: {known_names(definitions.agents)}",
        )
    prompts: dict[str, PromptDef] = {}
    tools: dict[str, ToolSpec] = {}
    agents: dict[str, AgentDef] = {}
    # A handoff target runs in this same thread, so its prompts, models and tools are
    # frozen here too; a subagent's are frozen by its own thread when it starts.
    pending, visited = [agent], set()
    while pending:
        current = pending.pop()
        if current.name in visited:
            continue
        visited.add(current.name)
        for side in filter(None, (current.side_a, current.side_b)):
            _collect_prompt(definitions, side.prompt, prompts)
            for name, spec in lifecycle_specs(side, definitions.tools).items():
                tools.setdefault(name, spec)
        _collect_prompt_tools(definitions, prompts)
        for prompt in list(prompts.values()):
            for tool_name in prompt.tool_names():
                target = definitions.agents.get(tool_name)
                if target is None or tool_name in definitions.tools:
                    continue
                if target.name != agent.name:
                    agents[target.name] = target
                if target.type == "ai_human":
                    pending.append(target)
    models: dict[str, ModelDef] = {}
    for prompt in prompts.values():
        _collect_model(definitions, prompt.model, models)
        _collect_tools(definitions, prompt, tools)
    resumable = _resumable_subagents(definitions, prompts)
    if resumable:
        tools.update(resumable_subagent_specs(definitions.agents, resumable))
    hooks = _collect_hooks(definitions, [agent, *agents.values()], prompts)
    effects = {name: effect.spec() for name, effect in sorted(definitions.effects.items())}
    mcp_servers = _collect_mcp_servers(definitions, prompts)
    return DefinitionSnapshot(
        snapshot_id=_snapshot_id(
            agent, agents, prompts, models, tools, hooks, effects, mcp_servers
        ),
        agent=agent,
        agents=agents,
        prompts=prompts,
        models=models,
        tools=tools,
        hooks=hooks,
        effects=effects,
        mcp_servers=mcp_servers,
    )


def _collect_prompt(definitions: DefinitionTables, name: str, into: dict[str, PromptDef]) -> None:
    if name in into:
        return
    prompt = definitions.prompts[name]
    into[name] = prompt
    if isinstance(prompt.prompt, list):
        for part in prompt.prompt:
            if part.type == "include" and part.prompt:
                _collect_prompt(definitions, part.prompt, into)


def _collect_hooks(
    definitions: DefinitionTables, agents: list[AgentDef], prompts: dict[str, PromptDef]
) -> dict[str, HookSpec]:
    """The id and point of every hook the snapshot's agents and prompts name (validated)."""
    named = [i for a in agents for i in a.hooks]
    named += [i for p in prompts.values() for i in p.hooks or []]
    return {
        i: HookSpec(id=i, hook=definitions.hooks[i].hook)
        for i in dict.fromkeys(named)
        if i in definitions.hooks
    }


def _collect_model(definitions: DefinitionTables, name: str, into: dict[str, ModelDef]) -> None:
    if name in into:
        return
    into[name] = definitions.models[name]
    for fallback in definitions.models[name].fallbacks:
        _collect_model(definitions, fallback, into)


def _collect_tools(
    definitions: DefinitionTables, prompt: PromptDef, into: dict[str, ToolSpec]
) -> None:
    """The specs of the prompt's tools: function tools, ask_human, agent and prompt tools."""
    for tool_name in prompt.tool_names():
        if tool_name in definitions.tools:
            spec = definitions.tools[tool_name].spec()
            into[tool_name] = spec.model_copy(update={"name": tool_name})
        elif tool_name == ASK_HUMAN_TOOL:
            into[tool_name] = ask_human_spec()
        elif tool_name == TASKS_TOOL:
            for name, spec in task_tool_specs().items():
                into.setdefault(name, spec)
        elif tool_name in definitions.agents:
            into.setdefault(tool_name, agent_tool_spec(definitions.agents[tool_name], prompt))
        elif tool_name in definitions.prompts:
            sub = definitions.prompts[tool_name]
            into.setdefault(tool_name, prompt_tool_spec(sub, prompt_tool_config(prompt, sub.name)))


def _collect_prompt_tools(definitions: DefinitionTables, into: dict[str, PromptDef]) -> None:
    """The prompts that `into`'s prompts list as tools, and theirs, recursively: a prompt
    tool runs in this thread, so its prompt, model and tools are frozen here too."""
    pending = list(into.values())
    while pending:
        for name in pending.pop().tool_names():
            if name in definitions.prompts and name not in into:
                before = set(into)
                _collect_prompt(definitions, name, into)
                pending += [into[n] for n in into if n not in before]


def _collect_mcp_servers(
    definitions: DefinitionTables, prompts: dict[str, PromptDef]
) -> dict[str, McpServerDef]:
    """The MCP servers the prompts use (`{mcp: x}`, `x.tool`), by name; no tool specs: a
    server's tools are known only once the `tool.catalog` activity lists them."""
    known = definitions.mcp_servers
    used = [s for p in prompts.values() for s in servers_of(p.tools, known) if s in known]
    return {name: known[name] for name in sorted(set(used))}


def _resumable_subagents(definitions: DefinitionTables, prompts: dict[str, PromptDef]) -> list[str]:
    """The dual_ai agents the prompts list as resumable, once each, in order."""
    names = [
        name
        for prompt in prompts.values()
        for name in prompt.tool_names()
        if name in definitions.agents
        and definitions.agents[name].type == "dual_ai"
        and tool_entry(prompt, name).get("resumable") not in (None, False)
    ]
    return list(dict.fromkeys(names))


def _snapshot_id(
    agent: AgentDef,
    agents: dict[str, AgentDef],
    prompts: dict[str, PromptDef],
    models: dict[str, ModelDef],
    tools: dict[str, ToolSpec],
    hooks: dict[str, HookSpec],
    effects: dict[str, EffectSpec],
    mcp_servers: dict[str, McpServerDef],
) -> str:
    """The content address: a digest of everything the snapshot freezes."""
    body: dict[str, Any] = {
        "agent": _agent_body(agent),
        "prompts": {k: v.model_dump(mode="json") for k, v in prompts.items()},
        "models": {k: v.model_dump(mode="json") for k, v in models.items()},
        "tools": {k: v.model_dump(mode="json") for k, v in tools.items()},
    }
    if agents:  # keeps the ids of snapshots without agent tools as they were
        body["agents"] = {k: v.model_dump(mode="json") for k, v in agents.items()}
    if hooks:  # likewise for snapshots without hooks
        body["hooks"] = {k: v.model_dump(mode="json") for k, v in hooks.items()}
    if effects:  # likewise for snapshots without effects
        body["effects"] = {k: v.model_dump(mode="json") for k, v in effects.items()}
    if mcp_servers:  # likewise for snapshots without MCP servers
        body["mcp_servers"] = {k: v.model_dump(mode="json") for k, v in mcp_servers.items()}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
    return f"snap_{digest}"


def _agent_body(agent: AgentDef) -> dict[str, Any]:
    body = agent.model_dump(mode="json")
    if body["definitionsPolicy"] == "latest":  # keeps the ids of snapshots from before it
        del body["definitionsPolicy"]
    return body
