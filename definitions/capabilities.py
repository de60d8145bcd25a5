"""Start-up checks of what models declare they cannot do.

`capabilities.supportsToolCalls: false` means a model cannot be offered tools: a prompt
that offers tools (its own `tools`, MCP servers' included, or its side's lifecycle tools)
on such a model, or on a fallback of it, is refused naming the prompt's (or agent's) file
and the model's.
"""

from __future__ import annotations

from weft.contract.definitions import ModelDef, PromptDef
from weft.definitions.errors import DefinitionError
from weft.definitions.mcp_checks import entry_label
from weft.definitions.tables import DefinitionTables


def check_model_capabilities(definitions: DefinitionTables) -> None:
    """Refuse tools offered to a model (or a fallback) that cannot call tools."""
    for prompt in definitions.prompts.values():
        if prompt.tools:
            _refuse_toolless(definitions, prompt, definitions.where("prompt", prompt.name), "tools")
    for agent in definitions.agents.values():
        for side_name, side in (("sideA", agent.side_a), ("sideB", agent.side_b)):
            if side is None or side.prompt not in definitions.prompts or not side.lifecycle_tools():
                continue
            _refuse_toolless(
                definitions,
                definitions.prompts[side.prompt],
                definitions.where("agent", agent.name),
                f"{side_name}.prompt",
                side.lifecycle_tools(),
            )


def _refuse_toolless(
    definitions: DefinitionTables,
    prompt: PromptDef,
    where: str,
    field: str,
    tools: list[str] | None = None,
) -> None:
    offered = tools if tools is not None else [entry_label(t) for t in prompt.tools]
    for model in _model_chain(definitions, prompt.model):
        if model.capabilities is not None and model.capabilities.supports_tool_calls is False:
            via = "" if model.name == prompt.model else f" (a fallback of {prompt.model!r})"
            raise DefinitionError(
                where,
                field,
                f"prompt {prompt.name!r} ({definitions.where('prompt', prompt.name)}) offers "
                f"tools ({', '.join(offered)}) but model {model.name!r}{via} "
                f"({definitions.where('model', model.name)}) sets "
                "capabilities.supportsToolCalls: false; use a model that can call tools, "
                "or offer none",
            )


def _model_chain(definitions: DefinitionTables, name: str) -> list[ModelDef]:
    """The model and its fallbacks, depth first, once each (unknown names skipped)."""
    chain: dict[str, ModelDef] = {}
    pending = [name]
    while pending:
        current = pending.pop(0)
        model = definitions.models.get(current)
        if model is None or current in chain:
            continue
        chain[current] = model
        pending = [*model.fallbacks, *pending]
    return list(chain.values())
