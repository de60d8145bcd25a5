"""Start-up checks of prompt tools (Runtime §5.3): a prompt listed in another prompt's tools.

An entry naming a prompt must be a valid sub-prompt config (`PromptToolConfig`, no other
keys); a name may not mean a prompt and something else at once; prompts may not call each
other in a cycle; a prompt that runs as a prompt tool may not list agent tools; and every
prompt that lists the same sub-prompt maps its arguments the same way (the tool has one
schema per thread). Each problem is a `DefinitionError` naming the files.
"""

from __future__ import annotations

from pydantic import ValidationError

from weft.contract.actions import ASK_HUMAN_TOOL
from weft.contract.definitions import PromptDef
from weft.contract.mcp import McpRef
from weft.contract.prompt_tools import PromptToolConfig
from weft.contract.subagents import SUBAGENT_CREATE_TOOL, SUBAGENT_MESSAGE_TOOL
from weft.contract.tool_catalog import tool_entry
from weft.contract.validation import describe_validation_error
from weft.definitions.errors import DefinitionError
from weft.definitions.tables import DefinitionTables

_RUNTIME_TOOLS = (ASK_HUMAN_TOOL, SUBAGENT_CREATE_TOOL, SUBAGENT_MESSAGE_TOOL)


def prompt_tool_config(prompt: PromptDef, name: str) -> PromptToolConfig:
    """The caller `prompt`'s entry for the prompt tool `name` (validated at start-up)."""
    return PromptToolConfig.model_validate(tool_entry(prompt, name))


def check_prompt_tool(
    definitions: DefinitionTables, where: str, index: int, prompt: PromptDef, name: str
) -> None:
    """One entry of `prompt`'s tools that names a prompt: unambiguous and a valid config."""
    field = f"tools[{index}]"
    others = []
    if name in definitions.tools:
        others.append(f"a function tool ({definitions.where('tool', name)})")
    if name in definitions.agents:
        others.append(f"an agent ({definitions.where('agent', name)})")
    if name in _RUNTIME_TOOLS:
        others.append("a tool the runtime provides")
    if others:
        raise DefinitionError(
            where,
            field,
            f"{name!r} is ambiguous: it is a prompt ({definitions.where('prompt', name)}) and "
            f"{' and '.join(others)}; rename one of them",
        )
    try:
        prompt_tool_config(prompt, name)
    except ValidationError as err:
        raise DefinitionError(
            where,
            field,
            f"prompt tool {name!r}: {describe_validation_error(err)} (a prompt tool entry "
            "takes name, includeTextResponse, includeToolCalls, includeErrors, "
            "initUserMessageProperty and initAttachmentsProperty)",
        ) from None


def check_prompt_tool_graph(definitions: DefinitionTables) -> None:
    """No cycle of prompt tools; no agent tool inside one; one argument mapping each."""
    _refuse_cycles(definitions)
    callers = _callers(definitions)
    for name, listing in callers.items():
        sub = definitions.prompts[name]
        # Over `tools` itself, so `tools[i]` counts `{mcp: x}` entries (which may stay).
        for i, entry in enumerate(sub.tools):
            if isinstance(entry, McpRef):
                continue
            tool_name = entry if isinstance(entry, str) else entry.name
            if tool_name in definitions.agents and tool_name not in definitions.tools:
                raise DefinitionError(
                    definitions.where("prompt", name),
                    f"tools[{i}]",
                    f"{tool_name!r} is an agent, but prompt {name!r} runs as a prompt tool "
                    f"(listed by {_files(definitions, listing)}); agent tools (subagents, "
                    "handoffs) cannot run inside a prompt tool",
                )
        mappings = {
            caller: (config.message_property(), config.init_attachments_property)
            for caller in listing
            for config in [prompt_tool_config(definitions.prompts[caller], name)]
        }
        if len(set(mappings.values())) > 1:
            first, *rest = listing
            other = next(c for c in rest if mappings[c] != mappings[first])
            raise DefinitionError(
                definitions.where("prompt", other),
                "tools",
                f"prompt tool {name!r} maps its arguments differently here "
                f"(initUserMessageProperty/initAttachmentsProperty {mappings[other]}) than in "
                f"{definitions.where('prompt', first)} ({mappings[first]}); a tool has one set "
                "of arguments, so every prompt that lists it must map them the same way",
            )


def _callers(definitions: DefinitionTables) -> dict[str, list[str]]:
    """For each prompt used as a prompt tool, the prompts that list it, in order."""
    callers: dict[str, list[str]] = {}
    for prompt in definitions.prompts.values():
        for name in dict.fromkeys(_prompt_tools(definitions, prompt)):
            callers.setdefault(name, []).append(prompt.name)
    return callers


def _prompt_tools(definitions: DefinitionTables, prompt: PromptDef) -> list[str]:
    return [n for n in prompt.tool_names() if n in definitions.prompts]


def _refuse_cycles(definitions: DefinitionTables) -> None:
    """Depth-first over prompt-tool edges; meeting a prompt on the current path is a cycle."""
    done: set[str] = set()
    for name in definitions.prompts:
        _visit(definitions, name, [], done)


def _visit(definitions: DefinitionTables, name: str, path: list[str], done: set[str]) -> None:
    if name in path:
        cycle = [*path[path.index(name) :], name]
        raise DefinitionError(
            definitions.where("prompt", cycle[0]),
            "tools",
            "prompt tools form a cycle: "
            + " → ".join(f"{n} ({definitions.where('prompt', n)})" for n in cycle)
            + "; a prompt tool cannot call itself, directly or through other prompts",
        )
    if name in done:
        return
    path.append(name)
    for target in _prompt_tools(definitions, definitions.prompts[name]):
        _visit(definitions, target, path, done)
    path.pop()
    done.add(name)


def _files(definitions: DefinitionTables, names: list[str]) -> str:
    return ", ".join(definitions.where("prompt", n) for n in names)
