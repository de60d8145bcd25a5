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
        for side in filter(None, (agent.side_a, agent.side_b)):
            self._collect_prompt(side.prompt, prompts)
            for name, spec in self._lifecycle_specs(side).items():
                tools.setdefault(name, spec)
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
        body = {
            "agent": agent.model_dump(mode="json"),
            "prompts": {k: v.model_dump(mode="json") for k, v in prompts.items()},
            "models": {k: v.model_dump(mode="json") for k, v in models.items()},
            "tools": {k: v.model_dump(mode="json") for k, v in tools.items()},
        }
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:24]
        return DefinitionSnapshot(
            snapshot_id=f"snap_{digest}", agent=agent, prompts=prompts, models=models, tools=tools
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
            if tool_name in self.prompts or tool_name in self.agents:
                raise DefinitionError(
                    where,
                    f"tools[{i}]",
                    f"{tool_name!r} is a prompt or "
                    "agent tool; sub-prompt and agent tools are not "
                    "supported by this runtime version yet",
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


def _names(table: dict[str, Any]) -> str:
    return ", ".join(sorted(table)) or "(none)"
