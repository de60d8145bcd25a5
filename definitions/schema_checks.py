"""Start-up checks of what a prompt asks of its models: structured output and reasoning.

`requiredSchema` must be a strict JSON Schema (an object at the root, `additionalProperties:
false` on every object), since OpenAI's strict mode and Anthropic's tool input both need
one; a model (or fallback) that declares `supportsJsonMode: false` cannot serve it.
`reasoning` takes known keys only, and an effort the model lists in `reasoningLevels`.
Each problem is a `DefinitionError` naming the file and the field.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from jsonschema import exceptions, validators
from pydantic import ValidationError

from weft.activities.providers.base import STRUCTURED_OUTPUT_TOOL
from weft.activities.providers.reasoning import ReasoningConfig
from weft.contract.definitions import ModelDef, PromptDef
from weft.contract.validation import describe_validation_error
from weft.definitions.errors import DefinitionError
from weft.definitions.tables import DefinitionTables

# Keywords whose value is one subschema, a list of them, or a mapping of names to them.
_ONE = ("items", "additionalItems", "contains", "not", "if", "then", "else", "propertyNames")
_LIST = ("prefixItems", "allOf", "anyOf", "oneOf")
_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


def check_model_requests(definitions: DefinitionTables) -> None:
    """Check every prompt's requiredSchema and reasoning, and every model's providerTools."""
    for model in definitions.models.values():
        for i, tool in enumerate(model.provider_tools):
            if not isinstance(tool, dict):
                raise DefinitionError(
                    definitions.where("model", model.name),
                    f"providerTools[{i}]",
                    f"must be an object (the provider's own tool definition), got {tool!r}",
                )
    for prompt in definitions.prompts.values():
        models = _chain(definitions, prompt.model)
        if prompt.required_schema is not None:
            _check_required_schema(definitions, prompt, models)
        if prompt.reasoning is not None:
            _check_reasoning(definitions, prompt, models)


def _chain(definitions: DefinitionTables, name: str) -> list[ModelDef]:
    """The prompt's model and its fallbacks: any of them may answer."""
    model = definitions.models[name]
    return [model, *(definitions.models[f] for f in model.fallbacks)]


def _check_required_schema(
    definitions: DefinitionTables, prompt: PromptDef, models: list[ModelDef]
) -> None:
    where = definitions.where("prompt", prompt.name)
    schema = prompt.required_schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise DefinitionError(
            where, "requiredSchema", 'must be an object schema ("type": "object")'
        )
    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as err:
        at = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise DefinitionError(
            where, "requiredSchema", f"is not a valid JSON Schema at {at}: {err.message}"
        ) from None
    for path, node in _subschemas(schema, "requiredSchema"):
        if _is_object(node) and node.get("additionalProperties") is not False:
            raise DefinitionError(
                where,
                path,
                "is an object schema without `additionalProperties: false`; structured "
                "output needs a strict schema, closed at every level",
            )
    if STRUCTURED_OUTPUT_TOOL in prompt.tool_names():
        raise DefinitionError(
            where,
            "tools",
            f"{STRUCTURED_OUTPUT_TOOL!r} is the tool weft gives the model for requiredSchema; "
            "rename this tool",
        )
    for model in models:
        if model.capabilities is not None and model.capabilities.supports_json_mode is False:
            raise DefinitionError(
                where,
                "requiredSchema",
                f"model {model.name!r} ({definitions.where('model', model.name)}) declares "
                "capabilities.supportsJsonMode: false, so it cannot give structured output; "
                "use another model or drop requiredSchema",
            )


def _is_object(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    is_object = kind == "object" or (isinstance(kind, list) and "object" in kind)
    return is_object or "properties" in node


def _subschemas(node: Any, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object in `node` with its path, `node` first."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key in _ONE:
        yield from _subschemas(node.get(key), f"{path}.{key}")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        yield from _subschemas(extra, f"{path}.additionalProperties")
    for key in _LIST:
        for i, item in enumerate(node.get(key) or []):
            yield from _subschemas(item, f"{path}.{key}[{i}]")
    for key in _MAP:
        table = node.get(key)
        for name, item in table.items() if isinstance(table, dict) else []:
            yield from _subschemas(item, f"{path}.{key}.{name}")


def _check_reasoning(
    definitions: DefinitionTables, prompt: PromptDef, models: list[ModelDef]
) -> None:
    where = definitions.where("prompt", prompt.name)
    try:
        config = ReasoningConfig.model_validate(prompt.reasoning)
    except ValidationError as err:
        raise DefinitionError(
            where,
            "reasoning",
            f"{describe_validation_error(err)} (known keys: effort, maxTokens or "
            "budgetTokens, enabled)",
        ) from None
    if config.effort is None or not config.enabled:
        return
    for model in models:
        levels = model.capabilities.reasoning_levels if model.capabilities else None
        if levels is not None and config.effort not in levels:
            raise DefinitionError(
                where,
                "reasoning.effort",
                f"{config.effort!r} is not one of the reasoning levels of model "
                f"{model.name!r} ({definitions.where('model', model.name)}): "
                f"{', '.join(levels) or '(none)'}",
            )
