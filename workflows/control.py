"""Validation of control-plane payloads (signals, updates, intents) into typed requests.

A malformed payload raises `InvalidPayload` with a readable message naming the field;
the control plane records it as a `runtime.warning` (signals) or refuses it (updates).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.exceptions import ApplicationError

from weft.contract.validation import describe_validation_error

Model = TypeVar("Model", bound=BaseModel)


class InvalidPayload(Exception):
    """A control-plane payload that does not fit its model; the message says why."""


def parse_update(name: str, payload: Any, model: type[Model]) -> Model:
    """An update's payload as `model`, or an `InvalidPayload` refusal (its validator's)."""
    try:
        return parse_single(name, [payload] if payload is not None else [], model)
    except InvalidPayload as err:
        raise ApplicationError(str(err), type="InvalidPayload") from None


def parse_single(kind: str, args: Sequence[Any], model: type[Model]) -> Model:
    """Validate a handler's single JSON-object argument, or raise `InvalidPayload`."""
    if len(args) != 1:
        raise InvalidPayload(f"{kind} takes exactly one JSON object argument, got {len(args)}")
    value = args[0]
    if not isinstance(value, dict):
        raise InvalidPayload(f"{kind} takes a JSON object, got {_json_kind(value)}")
    try:
        return model.model_validate(value)
    except ValidationError as err:
        raise InvalidPayload(f"{kind}: {describe_validation_error(err)}") from None


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
