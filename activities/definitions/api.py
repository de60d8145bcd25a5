"""Defining agents, prompts, models and tools from Python (the same shapes as the YAML)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from activities.definitions.errors import DefinitionError
from contract.definitions import AgentDef, ModelDef, PromptDef, ToolSpec
from contract.validation import describe_validation_error

Definition = TypeVar("Definition", bound=BaseModel)


@dataclass(frozen=True)
class FunctionTool:
    """A function tool: a pydantic args model and `execute(state, args)`, sync or async.

    `side_effects` says whether running the tool twice could do harm; when such a tool is
    interrupted and its retries run out, the model is told the outcome is unknown.
    """

    name: str
    description: str
    args: type[BaseModel]
    execute: Callable[..., Any]
    side_effects: bool = True

    def spec(self) -> ToolSpec:
        """What the model sees: name, description and the JSON schema of the arguments."""
        return ToolSpec(
            name=self.name, description=self.description, parameters=self.args.model_json_schema()
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
) -> FunctionTool:
    """Define a function tool; in a `tools/NAME.py` file the name defaults to NAME."""
    source = f"tool {name or getattr(execute, '__name__', '?')!r}"
    if not (isinstance(args, type) and issubclass(args, BaseModel)):
        raise DefinitionError(source, "args", "must be a pydantic BaseModel subclass")
    if not callable(execute):
        raise DefinitionError(source, "execute", "must be callable as execute(state, args)")
    if not description.strip():
        raise DefinitionError(source, "description", "must not be empty")
    return FunctionTool(
        name=name or "",
        description=description,
        args=args,
        execute=execute,
        side_effects=side_effects,
    )


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
