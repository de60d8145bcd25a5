"""Writing what the workflow produced by itself (events, messages, the thread row)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from weft.contract.activities import ACTIVITY_STORE_FLUSH, FlushInput
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.workflows.thread_state import ThreadMemory


async def flush(mem: ThreadMemory, *, with_thread_row: bool = False) -> None:
    """Write what the workflow produced by itself (events, messages) with a local activity.

    `with_thread_row` also writes the thread's read-model row.
    """
    events, messages = mem.take_outbox(), mem.take_outbox_messages()
    thread_row = mem.thread_row() if with_thread_row else None
    if not events and not messages and thread_row is None:
        return
    try:
        await _write(mem, events, messages, thread_row)
    except ActivityError:
        # Keep them for the next activity rather than lose them.
        mem.return_outbox(events)
        mem.return_messages(messages)
        raise


async def persist_first(mem: ThreadMemory, events: list[Event], messages: list[Message]) -> None:
    """Write messages and events now, so the activity scheduled next need not carry them.

    A local activity's input never reaches Temporal history, so this has no payload limit:
    it is how many large queued messages reach the store without an oversized payload.
    """
    await _write(mem, events, messages, None)


async def _write(
    mem: ThreadMemory,
    events: list[Event],
    messages: list[Message],
    thread_row: dict[str, Any] | None,
) -> None:
    await workflow.execute_local_activity(
        ACTIVITY_STORE_FLUSH,
        FlushInput(
            thread_id=mem.thread_id, events=events, messages=messages, thread_row=thread_row
        ),
        start_to_close_timeout=timedelta(seconds=30),
        retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=10)),
    )
