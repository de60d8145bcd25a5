"""The tool specs a snapshot offers the model for tools that are not function tools.

Lifecycle tools (stop, session stop/fail/status), `ask_human`, agents exposed as tools
(subagents and handoffs), prompt tools and `subagent_create` / `subagent_message` for
resumable subagents: each is built in, run by the workflow rather than by a tool activity.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from typing import Any

from weft.contract.actions import ASK_HUMAN_PARAMETERS, ASK_HUMAN_TOOL
from weft.contract.definitions import AgentDef, PromptDef, SessionTool, SideConfig, ToolSpec
from weft.contract.prompt_tools import PromptToolConfig
from weft.contract.subagents import (
    DEFAULT_MESSAGE_PROPERTY,
    SUBAGENT_CREATE_TOOL,
    SUBAGENT_MESSAGE_TOOL,
    HandoffToolConfig,
    SubagentToolConfig,
)
from weft.contract.tool_catalog import tool_entry

# JSON schema of a tool's parameters (an object schema).
JsonSchema = dict[str, Any]


def lifecycle_specs(side: SideConfig, function_tools: Container[str]) -> dict[str, ToolSpec]:
    """Built-in specs for the side's lifecycle tools that no function tool defines."""
    specs: dict[str, ToolSpec] = {}
    lifecycle: list[tuple[str | None, SessionTool | None, str]] = [
        (side.stop_tool, None, "End your turn."),
        (None, side.session_stop, "End the session successfully."),
        (None, side.session_fail, "End the session as failed."),
        (None, side.session_status, "Report a status update without ending anything."),
    ]
    for name, tool, description in lifecycle:
        tool_name = name or (tool.name if tool else None)
        if not tool_name or tool_name in function_tools:
            continue
        properties: JsonSchema = {}
        text_prop = (
            side.stop_tool_response_property if name else (tool.message_property if tool else None)
        )
        if text_prop:
            properties[text_prop] = {"type": "string"}
        if tool and tool.attachments_property:
            properties[tool.attachments_property] = {"type": "array", "items": {"type": "string"}}
        specs[tool_name] = ToolSpec(
            name=tool_name,
            description=description,
            builtin=True,
            kind="lifecycle",
            parameters={"type": "object", "properties": properties},
        )
    return specs


def ask_human_spec() -> ToolSpec:
    """`ask_human`: the workflow answers it from `respond_action`, no activity runs it."""
    return ToolSpec(
        name=ASK_HUMAN_TOOL,
        description="Ask a human a question and wait for the answer before proceeding.",
        parameters=ASK_HUMAN_PARAMETERS,
        builtin=True,
    )


def agent_tool_spec(agent: AgentDef, prompt: PromptDef) -> ToolSpec:
    """What the model sees of an agent tool: a subagent to run, or a handoff."""
    entry = tool_entry(prompt, agent.name)
    description = agent.tool_description or agent.description or f"The {agent.name} agent."
    properties: JsonSchema = {}
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
    if config.init_attachments_property:
        properties[config.init_attachments_property] = _attachments()
    if config.init_agent_name_property:
        properties[config.init_agent_name_property] = {
            "type": "string",
            "description": "a short display name for this subagent",
        }
    return ToolSpec(
        name=agent.name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": [config.message_property()],
        },
        builtin=True,
        kind="subagent",
        target=agent.name,
    )


def prompt_tool_spec(prompt: PromptDef, config: PromptToolConfig) -> ToolSpec:
    """A prompt tool (Runtime §5.3): the model sees the prompt's toolDescription, and the
    arguments that become its first message (and attachments, when mapped)."""
    properties: JsonSchema = {
        config.message_property(): {
            "type": "string",
            "description": "the request for this tool (its first message)",
        }
    }
    if config.init_attachments_property:
        properties[config.init_attachments_property] = {
            "type": "array",
            "items": {"type": "string"},
            "description": "paths of files in this thread the request refers to",
        }
    return ToolSpec(
        name=prompt.name,
        description=prompt.tool_description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": [config.message_property()],
        },
        builtin=True,
        kind="prompt",
        target=prompt.name,
    )


def resumable_subagent_specs(
    agents: Mapping[str, AgentDef], names: list[str]
) -> dict[str, ToolSpec]:
    """`subagent_create` and `subagent_message` (Runtime §7.2) for resumable subagents."""
    described = "; ".join(
        f"{n}: {agents[n].tool_description or agents[n].description or 'a subagent'}" for n in names
    )
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
                "attachments": _attachments(),
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
                "attachments": _attachments(),
            },
            "required": ["reference", "message"],
        },
        builtin=True,
        kind="subagent_message",
    )
    return {create.name: create, message.name: message}


def _attachments() -> JsonSchema:
    # A fresh schema each time: specs are models a caller may change.
    return {
        "type": "array",
        "items": {"type": "string"},
        "description": "paths of files in this thread to copy to the subagent",
    }
