"""The request fields a prompt and its model decide beyond messages and tools.

Each was checked at worker start-up (`definitions/schema_checks.py`), so this
only translates.
"""

from __future__ import annotations

from typing import Any, TypedDict

from weft.activities.providers.reasoning import ReasoningConfig, reasoning_of
from weft.contract.definitions import ModelDef, PromptDef


class DefinitionFields(TypedDict):
    """Keyword arguments of `ChatRequest` taken from the definitions."""

    response_schema: dict[str, Any] | None
    reasoning: ReasoningConfig | None
    provider_tools: list[dict[str, Any]]
    stream: bool


def definition_fields(prompt: PromptDef, model: ModelDef) -> DefinitionFields:
    """requiredSchema, reasoning, the model's providerTools and whether it can stream."""
    return DefinitionFields(
        response_schema=prompt.required_schema,
        reasoning=reasoning_of(prompt.reasoning),
        provider_tools=[dict(tool) for tool in model.provider_tools],
        stream=streams(model),
    )


def streams(model: ModelDef) -> bool:
    """False when the model declares `capabilities.supportsStreaming: false`."""
    capabilities = model.capabilities
    return not (capabilities is not None and capabilities.supports_streaming is False)
