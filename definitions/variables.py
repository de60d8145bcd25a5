"""Declared variables (Standard Agents): the env values a thread must hold when it starts.

A prompt's `variables` and a function tool's (`define_tool(variables=...)`) declare env
values. When a thread starts, every `required` variable of the prompts in its snapshot
(its agent's, a handoff target's, included and sub-prompts) and of the function tools
those prompts offer must resolve from the thread's env, the agent's `env` or the prompt's
`env`; otherwise the thread does not start and the error names the definition's file and
the variable. A thread value given without a type takes the declared `type` (a secret
wins over text when two declarations disagree).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from weft.contract.definitions import AgentDef, DefinitionSnapshot, VariableDef
from weft.definitions.errors import DefinitionError
from weft.definitions.tables import DefinitionTables


class MissingVariable(DefinitionError):
    """A required variable resolves nowhere: the thread cannot start."""


@dataclass(frozen=True)
class Declared:
    """One declaration, where it was made, and the env it may resolve from besides the thread's."""

    source: str
    name: str
    variable: VariableDef
    defaults: tuple[Mapping[str, Any], ...]


def declared_variables(
    definitions: DefinitionTables, snapshot: DefinitionSnapshot
) -> list[Declared]:
    """Every variable the snapshot's prompts and their function tools declare, in order."""
    found: list[Declared] = []
    owners = _prompt_owners(snapshot)
    for prompt in snapshot.prompts.values():
        agent = owners.get(prompt.name, snapshot.agent)
        defaults = (prompt.env, agent.env)
        where = definitions.where("prompt", prompt.name)
        found += [Declared(where, n, v, defaults) for n, v in prompt.variables.items()]
        for tool_name in prompt.tool_names():
            tool = definitions.tools.get(tool_name)
            if tool is not None:
                where = definitions.where("tool", tool_name)
                found += [Declared(where, n, v, defaults) for n, v in tool.variables.items()]
    return found


def thread_env(
    definitions: DefinitionTables, snapshot: DefinitionSnapshot, env: Mapping[str, Any]
) -> dict[str, Any]:
    """The thread's env with declared types applied; `MissingVariable` for the first
    required variable that resolves nowhere."""
    declared = declared_variables(definitions, snapshot)
    for item in declared:
        if item.variable.required and not _resolves(item, env):
            about = f" ({item.variable.description})" if item.variable.description else ""
            raise MissingVariable(
                item.source,
                f"variables.{item.name}",
                f"required variable {item.name!r}{about} is not set; give it in the thread's "
                "env when starting it, or in the agent's or the prompt's `env`",
            )
    types: dict[str, str] = {}
    for item in declared:
        if types.get(item.name) != "secret":
            types[item.name] = item.variable.type
    return {name: _typed(value, types.get(name)) for name, value in env.items()}


def _resolves(item: Declared, env: Mapping[str, Any]) -> bool:
    return any(_set(layer.get(item.name)) for layer in (env, *item.defaults))


def _set(value: Any) -> bool:
    if _is_entry(value):
        value = value["value"]
    return value is not None and value != ""


def _typed(value: Any, declared: str | None) -> Any:
    """A value of a declared variable given without a type, as `{value, type: declared}`."""
    if declared is None:
        return value
    if _is_entry(value):
        return value if "type" in value else {**value, "type": declared}
    return {"value": value, "type": declared}


def _is_entry(value: Any) -> bool:
    """`{value, type?}`: the typed form `contract.thread_env.parse_env` accepts."""
    return isinstance(value, dict) and "value" in value and set(value) <= {"value", "type"}


def _prompt_owners(snapshot: DefinitionSnapshot) -> dict[str, AgentDef]:
    """The agent whose side runs each side prompt (the thread's own agent first)."""
    owners: dict[str, AgentDef] = {}
    agents = [snapshot.agent, *(a for a in snapshot.agents.values() if a.type == "ai_human")]
    for agent in agents:
        for side in filter(None, (agent.side_a, agent.side_b)):
            owners.setdefault(side.prompt, agent)
    return owners
