"""The gateway's HTTP bodies; the `VariableRequest` itself comes from `contract/subagents.py`."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from weft.contract.wire import CamelModel


class ProvideValues(CamelModel):
    """POST body: one value per missing variable name."""

    values: dict[str, Any] = Field(
        description="every name the request is missing, each a string, number or boolean",
        json_schema_extra={"additionalProperties": {"type": ["string", "number", "boolean"]}},
    )


class ValuesAccepted(CamelModel):
    """POST reply: the values are stored and the parent thread was told."""

    request_id: str
    status: Literal["provided"] = "provided"


class ErrorBody(BaseModel):
    """Every error reply: what went wrong, and the request fields at fault, if any."""

    error: str
    fields: list[str] = Field(default_factory=list)


class Health(BaseModel):
    """`GET /healthz`: whether the store and Temporal answer."""

    status: Literal["ok", "unavailable"]
    store: bool
    temporal: bool
