"""Definitions (Standard Agents 0.1.0): models, prompts, agents and tool schemas.

Field names are the spec's camelCase in YAML and JSON; Python uses snake_case attributes.
A thread snapshots the definitions it uses when it starts (`DefinitionSnapshot`), so
editing a file never changes a turn in progress: a thread takes newer definitions only
between turns, as its agent's `definitionsPolicy` says (docs/deploys.md).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from weft.contract.actions import PermissionPolicy
from weft.contract.budget import Budget
from weft.contract.hooks import HookSpec
from weft.contract.mcp import McpRef, McpServerDef
from weft.contract.retention import RetentionPolicy
from weft.contract.wire import CamelModel

NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$"

DefinitionsPolicy = Literal["latest", "pinned"]


class Capabilities(CamelModel):
    """What a model can do; unknown capabilities are left unset, never guessed."""

    supports_images: bool | None = None
    supports_tool_calls: bool | None = None
    supports_streaming: bool | None = None
    supports_json_mode: bool | None = None
    max_context_tokens: int | None = None
    max_output_tokens: int | None = None
    reasoning_levels: list[str] | None = None


class ModelDef(CamelModel):
    """A model definition: which provider serves it, its name there, prices, fallbacks."""

    name: str = Field(pattern=NAME_PATTERN)
    provider: str = Field(min_length=1)
    model: str = Field(min_length=1)
    fallbacks: list[str] = Field(default_factory=list)
    input_price: float | None = Field(default=None, ge=0)
    output_price: float | None = Field(default=None, ge=0)
    cached_price: float | None = Field(default=None, ge=0)
    provider_options: dict[str, Any] = Field(default_factory=dict)
    provider_tools: list[Any] = Field(default_factory=list)
    capabilities: Capabilities | None = None


class PromptPart(CamelModel):
    """One part of a structured prompt: literal text, an included prompt, or an env value."""

    type: Literal["text", "include", "env"]
    content: str | None = None
    prompt: str | None = None
    property: str | None = None

    @model_validator(mode="after")
    def _has_its_field(self) -> PromptPart:
        needed = {"text": "content", "include": "prompt", "env": "property"}[self.type]
        if getattr(self, needed) is None:
            raise ValueError(f"a prompt part of type {self.type!r} needs {needed!r}")
        return self


class ToolRef(CamelModel):
    """A prompt's tool entry in object form; sub-prompt and subagent fields are kept."""

    model_config = CamelModel.model_config | {"extra": "allow"}

    name: str = Field(min_length=1)
    env: dict[str, Any] | None = None
    options: dict[str, Any] | None = None


class VariableDef(CamelModel):
    """A declared variable (Standard Agents): an env value a prompt or tool needs.

    `required` ones must resolve (thread, agent or prompt env) when a thread starts; a value
    given without a type takes the declared `type`.
    """

    type: Literal["text", "secret"] = "secret"
    required: bool = False
    scoped: bool = False
    description: str | None = None


def variables_by_name(value: Any) -> Any:
    """The spec's list form `[{name, type, ...}]` as the mapping `{name: {type, ...}}`."""
    if not isinstance(value, list):
        return value
    named: dict[str, Any] = {}
    for i, item in enumerate(value):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise ValueError(f"variables[{i}] needs a `name`")
        name = item["name"]
        if name in named:
            raise ValueError(f"variables[{i}]: {name!r} is declared twice")
        named[name] = {k: v for k, v in item.items() if k != "name"}
    return named


class PromptDef(CamelModel):
    """A prompt definition: the system prompt, its model and its tools."""

    name: str = Field(pattern=NAME_PATTERN)
    tool_description: str
    prompt: str | list[PromptPart]
    model: str = Field(min_length=1)
    include_chat: bool = False
    include_past_tools: bool = False
    parallel_tool_calls: bool = False
    tool_choice: Literal["auto", "none", "required"] | None = None
    required_schema: dict[str, Any] | None = None
    variables: dict[str, VariableDef] = Field(default_factory=dict)
    env: dict[str, Any] = Field(default_factory=dict)
    reasoning: dict[str, Any] | None = None
    recent_image_threshold: int = Field(default=10, ge=0)
    provider_options: dict[str, Any] = Field(default_factory=dict)
    hooks: list[str] | None = None
    tools: list[str | ToolRef | McpRef] = Field(default_factory=list)
    permissions: PermissionPolicy | None = None

    @field_validator("variables", mode="before")
    @classmethod
    def _variables_list(cls, value: Any) -> Any:
        return variables_by_name(value)

    def tool_options(self, name: str) -> dict[str, Any]:
        """The `options` of the tool entry `name` (empty for a plain name)."""
        for tool in self.tools:
            if isinstance(tool, ToolRef) and tool.name == name:
                return tool.options or {}
        return {}

    def tool_names(self) -> list[str]:
        """The names of the tools this prompt offers, in order (`{mcp: server}` entries are
        not names: `contract.mcp` reads them; a `server.tool` string is listed as it is)."""
        return [
            t if isinstance(t, str) else t.name for t in self.tools if not isinstance(t, McpRef)
        ]


class SessionTool(CamelModel):
    """A lifecycle tool (`sessionStop`, `sessionFail`, `sessionStatus`) and its argument map."""

    name: str = Field(min_length=1)
    message_property: str | None = None
    attachments_property: str | None = None


class SideConfig(CamelModel):
    """One side of an agent: its prompt and the rules that end its turns and sessions."""

    prompt: str = Field(min_length=1)
    label: str | None = None
    stop_on_response: bool = True
    stop_tool: str | None = None
    stop_tool_response_property: str | None = None
    max_steps: int | None = Field(default=None, ge=1)
    session_stop: SessionTool | None = None
    session_fail: SessionTool | None = None
    session_status: SessionTool | None = None

    @field_validator("session_stop", "session_fail", "session_status", mode="before")
    @classmethod
    def _name_alone(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    def lifecycle_tools(self) -> list[str]:
        """Names of the tools this side ends or marks sessions and turns with."""
        named = [self.stop_tool]
        named += [t.name if t else None for t in (self.session_stop, self.session_fail)]
        named.append(self.session_status.name if self.session_status else None)
        return [n for n in named if n]


class AgentDef(CamelModel):
    """An agent definition: one side for `ai_human`, two for `dual_ai`."""

    name: str = Field(pattern=NAME_PATTERN)
    type: Literal["ai_human", "dual_ai"] = "ai_human"
    side_a: SideConfig
    side_b: SideConfig | None = None
    max_session_turns: int | None = Field(default=None, ge=1)
    description: str | None = None
    title: str | None = None
    icon: str | None = None
    expose_as_tool: bool = False
    tool_description: str | None = None
    env: dict[str, Any] = Field(default_factory=dict)
    hooks: list[str] = Field(default_factory=list)
    permissions: PermissionPolicy | None = None
    budget: Budget | None = Field(
        default=None, description="caps for threads of this agent (the stricter one wins)"
    )
    definitions_policy: DefinitionsPolicy = Field(
        default="latest",
        description="when a thread takes newer definitions: at its next turn (`latest`), or "
        "only when `weft thread upgrade` moves it (`pinned`)",
    )
    retention: RetentionPolicy | None = Field(
        default=None,
        description="how long closed threads of this agent are kept (docs/deletion.md)",
    )

    @model_serializer(mode="wrap")
    def _without_unset_retention(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Left out when unset, so the digests and snapshot ids of agents without it stay
        # as they were before the field existed.
        data: dict[str, Any] = handler(self)
        if "retention" in data and data["retention"] is None:
            del data["retention"]
        return data

    @model_validator(mode="after")
    def _dual_ai_has_side_b(self) -> AgentDef:
        if self.type == "dual_ai" and self.side_b is None:
            raise ValueError("sideB is required when type is 'dual_ai'")
        return self

    def side(self, which: Literal["a", "b"]) -> SideConfig:
        """The config of side `which`."""
        if which == "b":
            assert self.side_b is not None, "validated: dual_ai agents have sideB"
            return self.side_b
        return self.side_a


class ToolSpec(CamelModel):
    """What the model sees of a tool: its name, description and JSON schema of arguments."""

    name: str
    description: str
    parameters: dict[str, Any]
    builtin: bool = Field(default=False, description="provided by the runtime, not a file")
    kind: Literal[
        "function",
        "lifecycle",
        "subagent",
        "handoff",
        "subagent_create",
        "subagent_message",
        "prompt",
    ] = Field(default="function", description="who runs it: a worker, or the workflow itself")
    target: str | None = Field(
        default=None, description="the agent a subagent/handoff tool runs, the prompt a prompt tool"
    )
    # Left out of the spec's JSON when false, so the definitions digests of tools that
    # are not quick stay what they were before the field (docs/defining-agents.md).
    quick: bool = Field(
        default=False,
        exclude_if=lambda quick: not quick,
        description="a function tool run as a local activity, in the thread's workflow task",
    )


class EffectSpec(CamelModel):
    """What a snapshot freezes of one effect: its name, description and args schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)


class DefinitionSnapshot(CamelModel):
    """Everything one agent needs, frozen when a thread starts.

    `agents` holds the handoff targets (with their prompts, models and tools collected
    here too) and the subagents (whose own definitions each child snapshots when it starts).
    """

    snapshot_id: str
    agent: AgentDef
    agents: dict[str, AgentDef] = Field(
        default_factory=dict,
        description="agents the thread may hand off to or spawn, by name (not `agent` itself)",
    )
    prompts: dict[str, PromptDef]
    models: dict[str, ModelDef]
    tools: dict[str, ToolSpec]
    hooks: dict[str, HookSpec] = Field(
        default_factory=dict, description="every hook a prompt or agent here names, by id"
    )
    effects: dict[str, EffectSpec] = Field(
        default_factory=dict, description="the effects the thread may schedule, by name"
    )
    mcp_servers: dict[str, McpServerDef] = Field(
        default_factory=dict, description="the MCP servers the prompts here use, by name"
    )

    def agent_def(self, name: str | None) -> AgentDef:
        """The agent `name` (a handoff target), or the thread's own agent for None."""
        if name is None or name == self.agent.name:
            return self.agent
        return self.agents[name]
