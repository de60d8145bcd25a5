"""The set of definitions a worker serves: cross-checked at start-up, snapshotted per thread."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from activities.definitions.api import FunctionTool
from activities.definitions.errors import DefinitionError
from contract.actions import ASK_HUMAN_PARAMETERS, ASK_HUMAN_TOOL, AskHumanOptions
from contract.definitions import (
    AgentDef,
    DefinitionSnapshot,
    ModelDef,
    PromptDef,
    SessionTool,
    SideConfig,
    ToolSpec,
)
from contract.subagents import (
    DEFAULT_MESSAGE_PROPERTY,
    SUBAGENT_CREATE_TOOL,
    SUBAGENT_MESSAGE_TOOL,
    HandoffToolConfig,
    SubagentToolConfig,
)
from contract.tool_catalog import tool_entry
from contract.validation import describe_validation_error


@dataclass
class Definitions:
    """Models, prompts, agents and function tools by name, with where each came from."""

    models: dict[str, ModelDef] = field(default_factory=dict)
    prompts: dict[str, PromptDef] = field(default_factory=dict)
    agents: dict[str, AgentDef] = field(default_factory=dict)
    tools: dict[str, FunctionTool] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)

    def add(
        self, *items: ModelDef | PromptDef | AgentDef | FunctionTool, source: str | None = None
    ) -> Definitions:
        """Add definitions made in Python; a second definition of a name is an error."""
        for item in items:
            kind, table = self._table_for(item)
            where = source or f"{kind} {item.name!r} (Python)"
            if not item.name:
                raise DefinitionError(where, "name", "is required")
            if item.name in table:
                first = self.sources.get(f"{kind}:{item.name}", "elsewhere")
                raise DefinitionError(
                    where, "name", f"{kind} {item.name!r} is already defined in {first}"
                )
            table[item.name] = item
            self.sources[f"{kind}:{item.name}"] = where
        return self

    def validate(self, *, providers: Iterable[str] | None = None) -> None:
        """Check every cross-reference; raise DefinitionError naming the file and field."""
        known_providers = set(providers) if providers is not None else None
        for model in self.models.values():
            self._check_model(model, known_providers)
        for prompt in self.prompts.values():
            self._check_prompt(prompt)
        for agent in self.agents.values():
            for side_name, side in (("sideA", agent.side_a), ("sideB", agent.side_b)):
                if side is not None:
                    self._check_side(agent, side_name, side)

    def snapshot(self, agent_name: str) -> DefinitionSnapshot:
        """Freeze what `agent_name` needs: its prompts, models (with fallbacks) and tools."""
        agent = self.agents.get(agent_name)
        if agent is None:
            raise DefinitionError(
                f"agent {agent_name!r}", None, f"unknown agent; known agents: {_names(self.agents)}"
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
                self._collect_prompt(side.prompt, prompts)
                for name, spec in self._lifecycle_specs(side).items():
                    tools.setdefault(name, spec)
            for prompt in list(prompts.values()):
                for tool_name in prompt.tool_names():
                    target = self.agents.get(tool_name)
                    if target is None or tool_name in self.tools:
                        continue
                    if target.name != agent.name:
                        agents[target.name] = target
                    if target.type == "ai_human":
                        pending.append(target)
        models: dict[str, ModelDef] = {}
        for prompt in prompts.values():
            self._collect_model(prompt.model, models)
            for tool_name in prompt.tool_names():
                if tool_name in self.tools:
                    tools[tool_name] = (
                        self.tools[tool_name].spec().model_copy(update={"name": tool_name})
                    )
                elif tool_name == ASK_HUMAN_TOOL:
                    tools[tool_name] = _ask_human_spec()
                elif tool_name in self.agents:
                    tools.setdefault(tool_name, _agent_tool_spec(self.agents[tool_name], prompt))
        resumable = [
            name
            for prompt in prompts.values()
            for name in prompt.tool_names()
            if name in self.agents
            and self.agents[name].type == "dual_ai"
            and tool_entry(prompt, name).get("resumable") not in (None, False)
        ]
        if resumable:
            tools.update(_lifecycle_subagent_specs(self.agents, list(dict.fromkeys(resumable))))
        body = {
            "agent": agent.model_dump(mode="json"),
            "prompts": {k: v.model_dump(mode="json") for k, v in prompts.items()},
            "models": {k: v.model_dump(mode="json") for k, v in models.items()},
            "tools": {k: v.model_dump(mode="json") for k, v in tools.items()},
        }
        if agents:  # keeps the ids of snapshots without agent tools as they were
            body["agents"] = {k: v.model_dump(mode="json") for k, v in agents.items()}
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        return DefinitionSnapshot(
            snapshot_id=f"snap_{digest}",
            agent=agent,
            agents=agents,
            prompts=prompts,
            models=models,
            tools=tools,
        )

    # ---- checks ----------------------------------------------------------------------

    def _check_model(self, model: ModelDef, providers: set[str] | None) -> None:
        where = self._where("model", model.name)
        if providers is not None and model.provider not in providers:
            raise DefinitionError(
                where,
                "provider",
                f"unknown provider {model.provider!r}; "
                f"configured providers: {', '.join(sorted(providers))}",
            )
        seen = {model.name}
        for i, fallback in enumerate(model.fallbacks):
            if fallback not in self.models:
                raise DefinitionError(
                    where,
                    f"fallbacks[{i}]",
                    f"unknown model {fallback!r}; known models: {_names(self.models)}",
                )
            if fallback in seen:
                raise DefinitionError(
                    where,
                    f"fallbacks[{i}]",
                    f"model {fallback!r} appears twice in the fallback chain",
                )
            seen.add(fallback)

    def _check_prompt(self, prompt: PromptDef) -> None:
        where = self._where("prompt", prompt.name)
        if prompt.model not in self.models:
            raise DefinitionError(
                where,
                "model",
                f"unknown model {prompt.model!r}; known models: {_names(self.models)}",
            )
        for i, tool_name in enumerate(prompt.tool_names()):
            if tool_name in self.tools:
                continue
            if tool_name == ASK_HUMAN_TOOL:
                self._check_ask_human(where, i, prompt)
                continue
            if tool_name in self.agents:
                self._check_agent_tool(where, i, prompt, self.agents[tool_name])
                continue
            if tool_name in (SUBAGENT_CREATE_TOOL, SUBAGENT_MESSAGE_TOOL):
                raise DefinitionError(
                    where,
                    f"tools[{i}]",
                    f"{tool_name!r} is added by the runtime when a prompt has resumable "
                    "subagents; list the subagent itself instead",
                )
            if tool_name in self.prompts:
                raise DefinitionError(
                    where,
                    f"tools[{i}]",
                    f"{tool_name!r} is a prompt; sub-prompt tools are not supported by this "
                    "runtime version yet (use a dual_ai agent with exposeAsTool as a subagent)",
                )
            raise DefinitionError(
                where,
                f"tools[{i}]",
                f"unknown tool {tool_name!r}; known tools: {_names(self.tools)}",
            )
        if isinstance(prompt.prompt, list):
            for i, part in enumerate(prompt.prompt):
                if part.type == "include" and part.prompt not in self.prompts:
                    raise DefinitionError(
                        where, f"prompt[{i}].prompt", f"unknown prompt {part.prompt!r} to include"
                    )

    def _check_agent_tool(self, where: str, index: int, prompt: PromptDef, agent: AgentDef) -> None:
        field_name = f"tools[{index}]"
        if not agent.expose_as_tool:
            raise DefinitionError(
                where,
                field_name,
                f"agent {agent.name!r} is not exposed as a tool; set exposeAsTool: true on it",
            )
        entry = tool_entry(prompt, agent.name)
        try:
            if agent.type == "dual_ai":
                config = SubagentToolConfig.model_validate(entry)
            else:
                HandoffToolConfig.model_validate(entry)
                return
        except ValidationError as err:
            kind = "subagent" if agent.type == "dual_ai" else "handoff (ai_human agent)"
            raise DefinitionError(
                where, field_name, f"{kind} {agent.name!r}: {describe_validation_error(err)}"
            ) from None
        if config.resumable is not False and config.init_agent_name_property:
            raise DefinitionError(
                where,
                f"{field_name}.initAgentNameProperty",
                "a resumable subagent is named by subagent_create's `name` argument",
            )

    def _check_ask_human(self, where: str, index: int, prompt: PromptDef) -> None:
        try:
            AskHumanOptions.model_validate(prompt.tool_options(ASK_HUMAN_TOOL))
        except ValidationError as err:
            raise DefinitionError(
                where, f"tools[{index}].options", describe_validation_error(err)
            ) from None

    def _check_side(self, agent: AgentDef, side_name: str, side: SideConfig) -> None:
        where = self._where("agent", agent.name)
        if side.prompt not in self.prompts:
            raise DefinitionError(
                where,
                f"{side_name}.prompt",
                f"unknown prompt {side.prompt!r}; known prompts: {_names(self.prompts)}",
            )
        if side.stop_tool_response_property and not side.stop_tool:
            raise DefinitionError(
                where, f"{side_name}.stopToolResponseProperty", "is set but stopTool is not"
            )

    # ---- snapshot helpers ------------------------------------------------------------

    def _collect_prompt(self, name: str, into: dict[str, PromptDef]) -> None:
        if name in into:
            return
        prompt = self.prompts[name]
        into[name] = prompt
        if isinstance(prompt.prompt, list):
            for part in prompt.prompt:
                if part.type == "include" and part.prompt:
                    self._collect_prompt(part.prompt, into)

    def _collect_model(self, name: str, into: dict[str, ModelDef]) -> None:
        if name in into:
            return
        into[name] = self.models[name]
        for fallback in self.models[name].fallbacks:
            self._collect_model(fallback, into)

    def _lifecycle_specs(self, side: SideConfig) -> dict[str, ToolSpec]:
        """Built-in specs for lifecycle tools that no function tool defines."""
        specs: dict[str, ToolSpec] = {}
        lifecycle: list[tuple[str | None, SessionTool | None, str]] = [
            (side.stop_tool, None, "End your turn."),
            (None, side.session_stop, "End the session successfully."),
            (None, side.session_fail, "End the session as failed."),
            (None, side.session_status, "Report a status update without ending anything."),
        ]
        for name, tool, description in lifecycle:
            tool_name = name or (tool.name if tool else None)
            if not tool_name or tool_name in self.tools:
                continue
            properties: dict[str, Any] = {}
            text_prop = (
                side.stop_tool_response_property
                if name
                else (tool.message_property if tool else None)
            )
            if text_prop:
                properties[text_prop] = {"type": "string"}
            if tool and tool.attachments_property:
                properties[tool.attachments_property] = {
                    "type": "array",
                    "items": {"type": "string"},
                }
            specs[tool_name] = ToolSpec(
                name=tool_name,
                description=description,
                builtin=True,
                kind="lifecycle",
                parameters={"type": "object", "properties": properties},
            )
        return specs

    def _where(self, kind: str, name: str) -> str:
        return self.sources.get(f"{kind}:{name}", f"{kind} {name!r}")

    def _table_for(self, item: object) -> tuple[str, dict[str, Any]]:
        if isinstance(item, ModelDef):
            return "model", self.models
        if isinstance(item, PromptDef):
            return "prompt", self.prompts
        if isinstance(item, AgentDef):
            return "agent", self.agents
        if isinstance(item, FunctionTool):
            return "tool", self.tools
        raise TypeError(f"cannot add {type(item).__name__} to definitions")


def _ask_human_spec() -> ToolSpec:
    # Built in: the workflow answers it from `respond_action`, no activity runs it.
    return ToolSpec(
        name=ASK_HUMAN_TOOL,
        description="Ask a human a question and wait for the answer before proceeding.",
        parameters=ASK_HUMAN_PARAMETERS,
        builtin=True,
    )


def _agent_tool_spec(agent: AgentDef, prompt: PromptDef) -> ToolSpec:
    """What the model sees of an agent tool: a subagent to run, or a handoff."""
    entry = tool_entry(prompt, agent.name)
    description = agent.tool_description or agent.description or f"The {agent.name} agent."
    properties: dict[str, Any] = {}
    required: list[str] = []
    if agent.type == "ai_human":
        handoff = HandoffToolConfig.model_validate(entry)
        prop = handoff.init_user_message_property or DEFAULT_MESSAGE_PROPERTY
        properties[prop] = {"type": "string", "description": "what to tell the new agent"}
        return ToolSpec(
            name=agent.name,
            description=f"Hand this conversation over to {agent.name}. {description}",
            parameters={"type": "object", "properties": properties},
            builtin=True,
            kind="handoff",
            target=agent.name,
        )
    config = SubagentToolConfig.model_validate(entry)
    properties[config.message_property()] = {
        "type": "string",
        "description": "the task for the subagent (its first message)",
    }
    required.append(config.message_property())
    if config.init_attachments_property:
        properties[config.init_attachments_property] = {
            "type": "array",
            "items": {"type": "string"},
            "description": "paths of files in this thread to copy to the subagent",
        }
    if config.init_agent_name_property:
        properties[config.init_agent_name_property] = {
            "type": "string",
            "description": "a short display name for this subagent",
        }
    return ToolSpec(
        name=agent.name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required},
        builtin=True,
        kind="subagent",
        target=agent.name,
    )


def _lifecycle_subagent_specs(agents: dict[str, AgentDef], names: list[str]) -> dict[str, ToolSpec]:
    """`subagent_create` and `subagent_message` (Runtime §7.2) for resumable subagents."""
    described = "; ".join(
        f"{n}: {agents[n].tool_description or agents[n].description or 'a subagent'}" for n in names
    )
    attachments = {
        "type": "array",
        "items": {"type": "string"},
        "description": "paths of files in this thread to copy to the subagent",
    }
    create = ToolSpec(
        name=SUBAGENT_CREATE_TOOL,
        description=f"Create a long-lived subagent that keeps its context ({described}). "
        "It answers each message and waits for the next; returns its reference.",
        parameters={
            "type": "object",
            "properties": {
                "agent": {"type": "string", "enum": names},
                "name": {"type": "string", "minLength": 1, "description": "a unique name"},
                "message": {"type": "string", "description": "its first task (optional)"},
                "attachments": attachments,
            },
            "required": ["agent", "name"],
        },
        builtin=True,
        kind="subagent_create",
    )
    message = ToolSpec(
        name=SUBAGENT_MESSAGE_TOOL,
        description="Send a message to a subagent made with subagent_create.",
        parameters={
            "type": "object",
            "properties": {
                "reference": {
                    "type": "string",
                    "description": "the subagent's reference or name",
                },
                "message": {"type": "string"},
                "attachments": attachments,
            },
            "required": ["reference", "message"],
        },
        builtin=True,
        kind="subagent_message",
    )
    return {create.name: create, message.name: message}


def _names(table: dict[str, Any]) -> str:
    return ", ".join(sorted(table)) or "(none)"
