"""Validation of control-plane payloads (signals and updates) into typed requests.

Nothing here raises into the workflow: a malformed payload becomes a readable error
string naming the field, which the workflow records as a `runtime.warning`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from contract.validation import describe_validation_error

Model = TypeVar("Model", bound=BaseModel)


def parse_single(kind: str, args: Sequence[Any], model: type[Model]) -> Model | str:
    """Validate a handler's single JSON-object argument, or explain what is wrong."""
    if len(args) != 1:
        return f"{kind} takes exactly one JSON object argument, got {len(args)}"
    value = args[0]
    if not isinstance(value, dict):
        return f"{kind} takes a JSON object, got {_json_kind(value)}"
    try:
        return model.model_validate(value)
    except ValidationError as err:
        return f"{kind}: {describe_validation_error(err)}"


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return type(value).__name__
