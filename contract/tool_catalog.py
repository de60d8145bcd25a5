"""Which tools a prompt offers, and how its agent-tool entries are configured.

Pure functions over a `DefinitionSnapshot`, shared by the workflow (which runs subagent,
handoff and lifecycle tools itself) and the model activity (which sends the tool list).
"""

from __future__ import annotations

from typing import Any

from weft.contract.definitions import DefinitionSnapshot, PromptDef, ToolRef
from weft.contract.subagents import (
    SUBAGENT_CREATE_TOOL,
    SUBAGENT_MESSAGE_TOOL,
    HandoffToolConfig,
    SubagentToolConfig,
)
from weft.contract.task_tools import TASK_TOOL_NAMES, TASKS_TOOL
from weft.contract.thread_env import EnvEntry

_TRUE_FLAGS = {"true", "1", "yes"}


def tool_entry(prompt: PromptDef, name: str) -> dict[str, Any]:
    """The prompt's entry for tool `name` as camelCase JSON (`{"name": name}` for a plain name)."""
    for entry in prompt.tools:
        if isinstance(entry, ToolRef) and entry.name == name:
            return entry.model_dump(by_alias=True, exclude_none=True)
    return {"name": name}


def subagent_configs(
    snapshot: DefinitionSnapshot, prompt: PromptDef
) -> dict[str, SubagentToolConfig]:
    """The prompt's subagent tools (entries naming a `dual_ai` agent), by agent name."""
    configs: dict[str, SubagentToolConfig] = {}
    for name in prompt.tool_names():
        spec = snapshot.tools.get(name)
        if spec is not None and spec.kind == "subagent":
            configs[name] = SubagentToolConfig.model_validate(tool_entry(prompt, name))
        elif name in snapshot.agents and snapshot.agents[name].type == "dual_ai":
            configs[name] = SubagentToolConfig.model_validate(tool_entry(prompt, name))
    return configs


def handoff_config(prompt: PromptDef, name: str) -> HandoffToolConfig:
    """The prompt's handoff entry for agent `name`."""
    return HandoffToolConfig.model_validate(tool_entry(prompt, name))


def flag_enabled(env: dict[str, EnvEntry], name: str) -> bool:
    """Runtime §7.3 `optional`: the env value is true, 1 or yes, in any case."""
    entry = env.get(name)
    return entry is not None and str(entry.value).strip().lower() in _TRUE_FLAGS


def enabled_subagents(
    snapshot: DefinitionSnapshot, prompt: PromptDef, env: dict[str, EnvEntry]
) -> dict[str, SubagentToolConfig]:
    """Subagent configs of `prompt` whose `optional` flag (if any) is on."""
    return {
        name: config
        for name, config in subagent_configs(snapshot, prompt).items()
        if config.optional is None or flag_enabled(env, config.optional)
    }


def offered_tools(
    snapshot: DefinitionSnapshot,
    prompt: PromptDef,
    lifecycle: list[str],
    env: dict[str, EnvEntry],
) -> list[str]:
    """The tool names the model is offered for `prompt`, in order, without repeats.

    Resumable subagents are reached through `subagent_create`/`subagent_message` only;
    a subagent whose `optional` flag is off is not offered at all.
    """
    configs = subagent_configs(snapshot, prompt)
    enabled = enabled_subagents(snapshot, prompt, env)
    names: list[str] = []
    resumable = False
    for name in prompt.tool_names():
        config = configs.get(name)
        if name == TASKS_TOOL:
            names += TASK_TOOL_NAMES  # the built-in task tools, when no tool is named `tasks`
        if config is None:
            names.append(name)
        elif name in enabled:
            if config.resumable is False:
                names.append(name)
            else:
                resumable = True
    if resumable:
        names += [SUBAGENT_CREATE_TOOL, SUBAGENT_MESSAGE_TOOL]
    names += lifecycle
    return [n for n in dict.fromkeys(names) if n in snapshot.tools]
