"""Cross-checks of loaded definitions: every reference resolves, every tool entry is valid.

Each problem raises a `DefinitionError` naming the file the definition came from (or its
kind and name) and the field, e.g. `prompts/helper.yaml: tools[2]: unknown tool 'x'`.
Names the runtime gives its own tools (`read_output`, `subagent_create`, …) are refused.
"""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from weft.contract.actions import ASK_HUMAN_TOOL, AskHumanOptions
from weft.contract.context import READ_OUTPUT_TOOL
from weft.contract.definitions import AgentDef, ModelDef, PromptDef, SideConfig
from weft.contract.mcp import McpRef, single_tool_ref
from weft.contract.subagents import (
    SUBAGENT_CREATE_TOOL,
    SUBAGENT_MESSAGE_TOOL,
    HandoffToolConfig,
    SubagentToolConfig,
)
from weft.contract.task_tools import TASKS_TOOL
from weft.contract.tool_catalog import tool_entry
from weft.contract.validation import describe_validation_error
from weft.definitions.capabilities import check_model_capabilities
from weft.definitions.errors import DefinitionError, known_names
from weft.definitions.field_check import check_field_support
from weft.definitions.mcp_checks import (
    check_mcp_ref,
    check_mcp_servers,
    check_mcp_tool,
    unknown_tool_hint,
)
from weft.definitions.prompt_tool_checks import (
    check_prompt_tool,
    check_prompt_tool_graph,
)
from weft.definitions.schema_checks import check_model_requests
from weft.definitions.tables import DefinitionTables

# `read_output` is weft's own: a definition of that name would shadow the reader the model
# needs to page through an output it saw only as a preview.
_RESERVED_READ_OUTPUT = (
    f"the name {READ_OUTPUT_TOOL!r} is reserved for weft's built-in output reader, which the "
    "runtime offers whenever the model sees an output only as a preview"
)


def check_definitions(
    definitions: DefinitionTables, providers: Iterable[str] | None = None
) -> None:
    """Check every cross-reference; with `providers`, also that each model's is configured."""
    known_providers = set(providers) if providers is not None else None
    if READ_OUTPUT_TOOL in definitions.tools:
        raise DefinitionError(
            definitions.where("tool", READ_OUTPUT_TOOL),
            "name",
            f"{_RESERVED_READ_OUTPUT}; give this tool another name",
        )
    for model in definitions.models.values():
        _check_model(definitions, model, known_providers)
    check_mcp_servers(definitions)
    for prompt in definitions.prompts.values():
        _check_prompt(definitions, prompt)
        _check_hooks(definitions, definitions.where("prompt", prompt.name), prompt.hooks or [])
    check_prompt_tool_graph(definitions)
    for agent in definitions.agents.values():
        _check_hooks(definitions, definitions.where("agent", agent.name), agent.hooks)
        for side_name, side in (("sideA", agent.side_a), ("sideB", agent.side_b)):
            if side is not None:
                _check_side(definitions, agent, side_name, side)
    check_model_capabilities(definitions)
    check_model_requests(definitions)
    check_field_support(definitions)


def _check_hooks(definitions: DefinitionTables, where: str, hook_ids: list[str]) -> None:
    """Every hook id an agent or prompt lists names a hook these definitions hold."""
    for i, hook_id in enumerate(hook_ids):
        if hook_id not in definitions.hooks:
            raise DefinitionError(
                where,
                f"hooks[{i}]",
                f"unknown hook {hook_id!r}; known hooks: {known_names(definitions.hooks)} "
                "(a hook is hooks/<id>.py, or define_hook(...) in Python)",
            )


def _unknown_provider(name: str, providers: set[str]) -> str:
    """What is wrong and how to configure `name`: a key of the worker's providers."""
    configured = (
        f"configured providers: {', '.join(sorted(providers))}"
        if providers
        else "no provider is configured"
    )
    ways = [
        f"providers={{{name!r}: weft.ProviderConfig(kind=..., base_url=..., api_key=...)}} "
        "in weft.Worker",
        f"a providers: entry {name!r} in temporal-dev.yml",
    ]
    prefix = {"openai": "OPENAI", "anthropic": "ANTHROPIC"}.get(name)
    if prefix is not None:
        # The variables only name these two keys (weft.Worker without providers=, the CLI).
        ways.insert(0, f"set {prefix}_BASE_URL and/or {prefix}_API_KEY")
    return f"unknown provider {name!r}: {configured}; configure it: " + ", or ".join(ways)


def _check_model(
    definitions: DefinitionTables, model: ModelDef, providers: set[str] | None
) -> None:
    where = definitions.where("model", model.name)
    if providers is not None and model.provider not in providers:
        raise DefinitionError(where, "provider", _unknown_provider(model.provider, providers))
    seen = {model.name}
    for i, fallback in enumerate(model.fallbacks):
        if fallback not in definitions.models:
            raise DefinitionError(
                where,
                f"fallbacks[{i}]",
                f"unknown model {fallback!r}; known models: {known_names(definitions.models)}",
            )
        if fallback in seen:
            raise DefinitionError(
                where,
                f"fallbacks[{i}]",
                f"model {fallback!r} appears twice in the fallback chain",
            )
        seen.add(fallback)


def _check_prompt(definitions: DefinitionTables, prompt: PromptDef) -> None:
    where = definitions.where("prompt", prompt.name)
    if prompt.model not in definitions.models:
        raise DefinitionError(
            where,
            "model",
            f"unknown model {prompt.model!r}; known models: {known_names(definitions.models)}",
        )
    # Indexed over `tools` itself: `tool_names()` skips `{mcp: x}`, which would shift `tools[i]`.
    for i, entry in enumerate(prompt.tools):
        if isinstance(entry, McpRef):
            check_mcp_ref(definitions, where, i, entry)
            continue
        name = entry if isinstance(entry, str) else entry.name
        if single_tool_ref(name, definitions.mcp_servers) is not None:
            check_mcp_tool(definitions, where, i, entry)
        else:
            _check_tool(definitions, where, i, prompt, name)
    if isinstance(prompt.prompt, list):
        for i, part in enumerate(prompt.prompt):
            if part.type == "include" and part.prompt not in definitions.prompts:
                raise DefinitionError(
                    where, f"prompt[{i}].prompt", f"unknown prompt {part.prompt!r} to include"
                )


def _check_tool(
    definitions: DefinitionTables, where: str, index: int, prompt: PromptDef, tool_name: str
) -> None:
    """One entry of a prompt's tools: a prompt tool, function tool, ask_human or agent tool."""
    if tool_name == READ_OUTPUT_TOOL:
        # Whatever it would resolve to (an agent exposed as a tool, say), it is refused.
        raise DefinitionError(where, f"tools[{index}]", f"{_RESERVED_READ_OUTPUT}; do not list it")
    if tool_name in definitions.prompts:
        check_prompt_tool(definitions, where, index, prompt, tool_name)
        return
    if tool_name in definitions.tools:
        return
    if tool_name == ASK_HUMAN_TOOL:
        _check_ask_human(where, index, prompt)
        return
    if tool_name == TASKS_TOOL:  # the built-in task tools (contract/task_tools.py)
        return
    if tool_name in definitions.agents:
        _check_agent_tool(where, index, prompt, definitions.agents[tool_name])
        return
    if tool_name in (SUBAGENT_CREATE_TOOL, SUBAGENT_MESSAGE_TOOL):
        raise DefinitionError(
            where,
            f"tools[{index}]",
            f"{tool_name!r} is added by the runtime when a prompt has resumable "
            "subagents; list the subagent itself instead",
        )
    raise DefinitionError(
        where,
        f"tools[{index}]",
        f"unknown tool {tool_name!r}; known tools: {known_names(definitions.tools)}"
        + unknown_tool_hint(definitions, tool_name),
    )


def _check_agent_tool(where: str, index: int, prompt: PromptDef, agent: AgentDef) -> None:
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


def _check_ask_human(where: str, index: int, prompt: PromptDef) -> None:
    try:
        AskHumanOptions.model_validate(prompt.tool_options(ASK_HUMAN_TOOL))
    except ValidationError as err:
        raise DefinitionError(
            where, f"tools[{index}].options", describe_validation_error(err)
        ) from None


def _check_side(
    definitions: DefinitionTables, agent: AgentDef, side_name: str, side: SideConfig
) -> None:
    where = definitions.where("agent", agent.name)
    if side.prompt not in definitions.prompts:
        raise DefinitionError(
            where,
            f"{side_name}.prompt",
            f"unknown prompt {side.prompt!r}; known prompts: {known_names(definitions.prompts)}",
        )
    if side.stop_tool_response_property and not side.stop_tool:
        raise DefinitionError(
            where, f"{side_name}.stopToolResponseProperty", "is set but stopTool is not"
        )
    lifecycle = {
        "stopTool": side.stop_tool,
        "sessionStop": side.session_stop.name if side.session_stop else None,
        "sessionFail": side.session_fail.name if side.session_fail else None,
        "sessionStatus": side.session_status.name if side.session_status else None,
    }
    for field_name, tool_name in lifecycle.items():
        if tool_name == READ_OUTPUT_TOOL:
            raise DefinitionError(
                where,
                f"{side_name}.{field_name}",
                f"{_RESERVED_READ_OUTPUT}; name this lifecycle tool otherwise",
            )
