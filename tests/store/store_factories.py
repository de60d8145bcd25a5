"""Builders for the thread rows, messages and events the store tests write."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from weft.contract.events import Event
from weft.contract.messages import Message, ToolCall, ToolCallFunction
from weft.store import ThreadRow


def new_thread_id() -> str:
    """A thread id no other test uses."""
    return f"thread-{uuid.uuid4().hex}"


def running_thread(thread_id: str, **fields: Any) -> ThreadRow:
    """A running thread's row of the agent `helper`, created at a fixed time."""
    values: dict[str, Any] = {
        "thread_id": thread_id,
        "agent": "helper",
        "status": "running",
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
    }
    return ThreadRow.model_validate({**values, **fields})


def message(thread_id: str, position: int, **fields: Any) -> Message:
    """A user message at `position`, with an id derived from it unless given."""
    values: dict[str, Any] = {
        "id": f"m{position}",
        "thread_id": thread_id,
        "position": position,
        "role": "user",
        "content": f"message {position}",
        "created_at": 1_700_000_000_000_000 + position,
    }
    return Message.model_validate({**values, **fields})


def tool_call(call_id: str, name: str = "lookup") -> ToolCall:
    """An OpenAI-shaped tool call."""
    return ToolCall(id=call_id, function=ToolCallFunction(name=name, arguments='{"q": 1}'))


def event(thread_id: str, event_id: str, type_: str = "step.started", **fields: Any) -> Event:
    """An event of `type_` without a sequence, as producers hand it to the store."""
    return Event(
        type=type_,
        event_id=event_id,
        timestamp="2025-11-21T10:00:00.000Z",
        thread_id=thread_id,
        **fields,
    )
