"""Conversions between the contract's models and table rows, and the thread read-model row."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import RowMapping

from weft.contract.context import ContextBoundary
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.contract.tenants import DEFAULT_TENANT


class ThreadRow(BaseModel):
    """What is kept about a thread for listing it, also after its workflow has closed."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    agent: str
    status: str
    session_id: str | None = None
    user_id: str | None = None
    parent_thread_id: str | None = None
    created_at: AwareDatetime
    updated_at: AwareDatetime | None = Field(default=None, description="defaults to created_at")
    stop_reason: str | None = None
    env: dict[str, Any] = Field(default_factory=dict)
    usage: dict[str, Any] = Field(default_factory=dict)
    last_outcome: str | None = None
    queue_depth: int = Field(
        default=0, description="entries waiting in the thread's queue, as of its last event"
    )
    tenant: str = Field(
        default=DEFAULT_TENANT, description="set at the thread's start, never changed"
    )

    @field_validator("created_at", "updated_at")
    @classmethod
    def _to_utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else value.astimezone(UTC)

    @model_validator(mode="after")
    def _default_updated_at(self) -> ThreadRow:
        if self.updated_at is None:
            self.updated_at = self.created_at
        return self


def message_to_row(message: Message) -> dict[str, Any]:
    """The column values for `message`; JSON-typed fields become plain lists and dicts."""
    return message.model_dump(mode="json")


def row_to_message(row: Mapping[Any, Any]) -> Message:
    """Rebuild a `Message` from its row."""
    return Message.model_validate(dict(row))


def row_to_event(data: dict[str, Any]) -> Event:
    """Rebuild an `Event` from the wire JSON stored with it."""
    return Event.model_validate(data)


def boundary_to_row(boundary: ContextBoundary, ordinal: int) -> dict[str, Any]:
    """The column values for `boundary`, the `ordinal`-th of its thread: its JSON plus
    the columns it is looked up and ordered by."""
    return {
        "thread_id": boundary.thread_id,
        "boundary_id": boundary.boundary_id,
        "ordinal": ordinal,
        "first_kept_position": boundary.first_kept_position,
        "kind": boundary.kind,
        "reason": boundary.reason,
        "created_at": boundary.created_at,
        "data": boundary.model_dump(mode="json"),
    }


def row_to_boundary(data: dict[str, Any]) -> ContextBoundary:
    """Rebuild a `ContextBoundary` from the JSON stored with it."""
    return ContextBoundary.model_validate(data)


def thread_to_row(thread: ThreadRow) -> dict[str, Any]:
    """The column values for a thread row; datetimes stay datetimes. `queue_depth` is left
    out: only its projection from `queue.changed` writes it (queue_rows.py)."""
    return thread.model_dump(exclude={"queue_depth"})


def row_to_thread(row: RowMapping) -> ThreadRow:
    """Rebuild a `ThreadRow` from its row."""
    return ThreadRow.model_validate(dict(row))
