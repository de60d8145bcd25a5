"""Defining agents, prompts, models, tools, hooks and effects from Python (the same shapes as the YAML)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from pydantic import BaseModel, TypeAdapter, ValidationError

from weft.contract.definitions import (
    AgentDef,
    EffectSpec,
    ModelDef,
    PromptDef,
    ToolSpec,
    VariableDef,
    variables_by_name,
)
from weft.contract.effects import EFFECT_NAME_PATTERN
from weft.contract.hooks import HOOK_ID_PATTERN, HOOK_NAMES, HookName
from weft.contract.validation import describe_validation_error
from weft.definitions.errors import DefinitionError

Definition = TypeVar("Definition", bound=BaseModel)

_VARIABLES = TypeAdapter(dict[str, VariableDef])


@dataclass(frozen=True)
class FunctionTool:
    """A function tool: a pydantic args model and `execute(state, args)`, sync or async.

    `variables` declares the env values it needs (required ones are checked when a thread
    starts). `side_effects=False` is refused (docs/definitions-fields.md): every tool is
    treated as having side effects. `quick` runs it as a Temporal local activity
    (docs/defining-agents.md, "Quick tools").
    """

    name: str
    description: str
    args: type[BaseModel]
    execute: Callable[..., Any]
    side_effects: bool = True
    variables: dict[str, VariableDef] = field(default_factory=dict)
    quick: bool = False

    def spec(self) -> ToolSpec:
        """What the model sees (name, description and the JSON schema of the arguments),
        and how the worker runs it."""
        return ToolSpec(
            name=self.name,
            description=self.description,
            parameters=self.args.model_json_schema(),
            quick=self.quick,
        )

    @property
    def is_async(self) -> bool:
        """Whether `execute` is a coroutine function (run on the event loop)."""
        return inspect.iscoroutinefunction(self.execute)


def define_tool(
    *,
    description: str,
    args: type[BaseModel],
    execute: Callable[..., Any],
    name: str | None = None,
    side_effects: bool = True,
    variables: list[dict[str, Any]] | dict[str, Any] | None = None,
    quick: bool = False,
) -> FunctionTool:
    """Define a function tool; in a `tools/NAME.py` file the name defaults to NAME.

    `quick=True` promises the tool ends within a second or two: each call then runs as a
    Temporal local activity in the thread's own workflow task (one activity round trip
    and one workflow task fewer a call), without heartbeats (docs/defining-agents.md,
    "Quick tools")."""
    source = f"tool {name or getattr(execute, '__name__', '?')!r}"
    if not (isinstance(args, type) and issubclass(args, BaseModel)):
        raise DefinitionError(source, "args", "must be a pydantic BaseModel subclass")
    if not callable(execute):
        raise DefinitionError(source, "execute", "must be callable as execute(state, args)")
    if not description.strip():
        raise DefinitionError(source, "description", "must not be empty")
    if not isinstance(quick, bool):
        raise DefinitionError(source, "quick", f"must be true or false, not {quick!r}")
    try:
        declared = _VARIABLES.validate_python(variables_by_name(variables or {}))
    except (ValueError, ValidationError) as err:
        text = describe_validation_error(err) if isinstance(err, ValidationError) else str(err)
        raise DefinitionError(source, "variables", text) from None
    return FunctionTool(
        name=name or "",
        description=description,
        args=args,
        execute=execute,
        side_effects=side_effects,
        variables=declared,
        quick=quick,
    )


@dataclass(frozen=True)
class FunctionEffect:
    """An effect (Standard Agents): a pydantic args model and `execute(state, args)`.

    Scheduled with `ThreadState.schedule_effect`, it runs when its timer fires, as the
    `effect.run` activity with a ThreadState (docs/effects.md). Sync `execute` runs in a
    worker thread, async on the event loop; its return value is recorded, not sent anywhere.
    """

    name: str
    description: str
    args: type[BaseModel]
    execute: Callable[..., Any]

    def spec(self) -> EffectSpec:
        """What a snapshot freezes: the name, description and the JSON schema of the args."""
        return EffectSpec(
            name=self.name, description=self.description, parameters=self.args.model_json_schema()
        )

    @property
    def is_async(self) -> bool:
        """Whether `execute` is a coroutine function (run on the event loop)."""
        return inspect.iscoroutinefunction(self.execute)


def define_effect(
    *,
    args: type[BaseModel],
    execute: Callable[..., Any],
    name: str | None = None,
    description: str = "",
) -> FunctionEffect:
    """Define an effect; in an `effects/NAME.py` file the name defaults to NAME."""
    source = f"effect {name or getattr(execute, '__name__', '?')!r}"
    if not (isinstance(args, type) and issubclass(args, BaseModel)):
        raise DefinitionError(source, "args", "must be a pydantic BaseModel subclass")
    if not callable(execute):
        raise DefinitionError(source, "execute", "must be callable as execute(state, args)")
    if name is not None and not re.fullmatch(EFFECT_NAME_PATTERN, name):
        raise DefinitionError(source, "name", f"{name!r} must match {EFFECT_NAME_PATTERN}")
    return FunctionEffect(name=name or "", description=description, args=args, execute=execute)


class HookBlocked(Exception):
    """Raised by a `before_*` hook to refuse the write it was shown; `reason` says why.

    The message or tool result is not stored as given and the turn ends with the stop
    reason `hook_blocked` (docs/hooks.md).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class FunctionHook:
    """A hook (Standard Agents): the point it hooks, its id and `execute(state, data)`.

    `execute` may be sync (run in a worker thread) or async; its return value replaces the
    data where the hook point allows it, None keeps the data (contract/hooks.py).
    """

    id: str
    hook: HookName
    execute: Callable[..., Any]

    @property
    def name(self) -> str:
        """The id, under the name every definition is kept by."""
        return self.id

    @property
    def is_async(self) -> bool:
        """Whether `execute` is a coroutine function (run on the event loop)."""
        return inspect.iscoroutinefunction(self.execute)


def define_hook(*, hook: str, execute: Callable[..., Any], id: str | None = None) -> FunctionHook:
    """Define a hook; in a `hooks/ID.py` file the id defaults to ID (the file stem)."""
    source = f"hook {id or getattr(execute, '__name__', '?')!r}"
    if hook not in HOOK_NAMES:
        raise DefinitionError(
            source, "hook", f"unknown hook {hook!r}; the hooks are: {', '.join(HOOK_NAMES)}"
        )
    if not callable(execute):
        raise DefinitionError(source, "execute", "must be callable as execute(state, data)")
    if id is not None and not re.fullmatch(HOOK_ID_PATTERN, id):
        raise DefinitionError(source, "id", f"{id!r} must be snake_case ({HOOK_ID_PATTERN})")
    return FunctionHook(id=id or "", hook=cast(HookName, hook), execute=execute)


def define_model(**fields: Any) -> ModelDef:
    """Define a model with the spec's fields (camelCase or snake_case)."""
    return _build(ModelDef, "model", fields)


def define_prompt(**fields: Any) -> PromptDef:
    """Define a prompt with the spec's fields (camelCase or snake_case)."""
    return _build(PromptDef, "prompt", fields)


def define_agent(**fields: Any) -> AgentDef:
    """Define an agent with the spec's fields (camelCase or snake_case)."""
    return _build(AgentDef, "agent", fields)


def _build(model: type[Definition], kind: str, fields: dict[str, Any]) -> Definition:
    try:
        return model.model_validate(fields)
    except ValidationError as err:
        name = fields.get("name", "?")
        raise DefinitionError(f"{kind} {name!r}", None, describe_validation_error(err)) from None
