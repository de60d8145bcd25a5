"""Refuses, at start-up, every definition field this runtime does not support.

What is supported is `field_support.FIELDS`; this walks each loaded definition (nested
models, tool entries, function tools, MCP servers) and raises a `DefinitionError` naming
the file and the field's path for the first refused field set to anything but its
default. A tool entry is read as the config of what it names: a function tool, ask_human, an agent
(subagent or handoff) or a prompt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from weft.contract.actions import ASK_HUMAN_TOOL
from weft.contract.definitions import ToolRef
from weft.contract.mcp import McpRef
from weft.contract.prompt_tools import PromptToolConfig
from weft.contract.subagents import HandoffToolConfig, SubagentToolConfig
from weft.contract.task_tools import TASKS_TOOL
from weft.contract.validation import describe_validation_error
from weft.definitions.errors import DefinitionError
from weft.definitions.field_support import Refused, support_of
from weft.definitions.mcp_checks import MCP_KIND
from weft.definitions.tables import DefinitionTables

if TYPE_CHECKING:
    from weft.definitions.api import FunctionTool

_FUNCTION_ENTRY_FIELDS = ("name", "env", "options")


def check_field_support(definitions: DefinitionTables) -> None:
    """Raise for the first refused field a definition sets (file, field path, why)."""
    for name, model in definitions.models.items():
        refuse_unsupported(definitions.where("model", name), model)
    for name, agent in definitions.agents.items():
        refuse_unsupported(definitions.where("agent", name), agent)
    for name, prompt in definitions.prompts.items():
        where = definitions.where("prompt", name)
        refuse_unsupported(where, prompt, skip=("tools",))
        for i, entry in enumerate(prompt.tools):
            if isinstance(entry, ToolRef):
                _check_entry(definitions, where, f"tools[{i}]", entry)
            elif isinstance(entry, McpRef):
                refuse_unsupported(where, entry, f"tools[{i}].")
    for name, tool in definitions.tools.items():
        _check_function_tool(definitions.where("tool", name), tool)
    for name, server in definitions.mcp_servers.items():
        refuse_unsupported(definitions.where(MCP_KIND, name), server)


def refuse_unsupported(
    where: str, model: BaseModel, prefix: str = "", skip: tuple[str, ...] = ()
) -> None:
    """Walk `model` and what it nests; raise for a refused field set to a non-default value."""
    fields = type(model).model_fields
    for name in sorted(model.model_fields_set & fields.keys(), key=list(fields).index):
        if name in skip:
            continue
        info = fields[name]
        alias = info.alias or name
        path = f"{prefix}{alias}"
        value = getattr(model, name)
        support = support_of(f"{type(model).__name__}.{alias}")
        if isinstance(support, Refused) and value != info.get_default(call_default_factory=True):
            raise DefinitionError(where, path, _refusal(support))
        for child_path, child in _nested(path, value):
            refuse_unsupported(where, child, child_path)


def _nested(path: str, value: Any) -> Iterator[tuple[str, BaseModel]]:
    if isinstance(value, BaseModel):
        yield f"{path}.", value
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, BaseModel):
                yield f"{path}[{i}].", item
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, BaseModel):
                yield f"{path}.{key}.", item


def _check_entry(definitions: DefinitionTables, where: str, path: str, entry: ToolRef) -> None:
    name = entry.name
    data = entry.model_dump(by_alias=True, exclude_none=True)
    if name in definitions.tools or name in (ASK_HUMAN_TOOL, TASKS_TOOL):
        extra = sorted(entry.model_extra or {})
        if extra:
            raise DefinitionError(
                where,
                f"{path}.{extra[0]}",
                f"is not a field of a function tool entry ({', '.join(_FUNCTION_ENTRY_FIELDS)}); "
                "it is not supported by this runtime version",
            )
        # ask_human's options are its own (AskHumanOptions, checked by validation).
        skip = ("options",) if name == ASK_HUMAN_TOOL else ()
        refuse_unsupported(where, entry, f"{path}.", skip)
    elif name in definitions.agents:
        agent = definitions.agents[name]
        config = SubagentToolConfig if agent.type == "dual_ai" else HandoffToolConfig
        try:
            parsed: BaseModel = config.model_validate(data)
        except ValidationError:
            return  # validation names the problem with the entry's own message
        refuse_unsupported(where, parsed, f"{path}.")
    elif name in definitions.prompts:
        try:
            parsed = PromptToolConfig.model_validate(data)
        except ValidationError as err:
            raise DefinitionError(
                where, path, f"prompt tool {name!r}: {describe_validation_error(err)}"
            ) from None
        refuse_unsupported(where, parsed, f"{path}.")


def _check_function_tool(where: str, tool: FunctionTool) -> None:
    for field in dataclasses.fields(tool):
        value = getattr(tool, field.name)
        support = support_of(f"define_tool.{field.name}")
        if isinstance(support, Refused) and value != field.default:
            raise DefinitionError(where, field.name, _refusal(support))
        for child_path, child in _nested(field.name, value):
            refuse_unsupported(where, child, child_path)


def _refusal(support: Refused) -> str:
    return f"is not supported by this runtime version: {support.why}"
