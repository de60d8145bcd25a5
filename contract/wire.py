"""Base classes for models that travel as JSON between services."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class CamelModel(BaseModel):
    """A model whose JSON field names are camelCase, as the specs spell them.

    Python code uses snake_case attributes; both spellings are accepted on input, and
    camelCase is written on output so other services see the spec's names.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
    )


class SnakeModel(BaseModel):
    """A model whose JSON field names are the spec's snake_case (messages, tool calls)."""

    model_config = ConfigDict(extra="forbid")
