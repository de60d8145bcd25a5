"""Large outputs stay out of Temporal payloads: the store keeps the full text, history a
preview and a ref (`output.spilled`).

Temporal rejects payloads over 2 MB, and large ones bloat every replay. The activity that
produced an output has already written it whole to the store, so the copy it returns into
history can be short; the model still reads the full text from the store.
"""

from __future__ import annotations

from typing import Any

from activities.clock import now_iso
from contract.events import Event
from contract.messages import Message

SPILL_THRESHOLD_BYTES = 64 * 1024
PREVIEW_CHARS = 2048


def message_ref(message: Message) -> str:
    """A stable reference to a stored message's content."""
    return f"weft://threads/{message.thread_id}/messages/{message.id}"


def spill_if_large(
    message: Message, *, ids: dict[str, Any], threshold: int = SPILL_THRESHOLD_BYTES
) -> tuple[Message, Event | None]:
    """The copy of `message` to return into history, and the event recording a spill."""
    content = message.content or ""
    size = len(content.encode("utf-8"))
    if size <= threshold:
        return message, None
    ref = message_ref(message)
    preview = content[:PREVIEW_CHARS]
    short = message.model_copy(
        update={
            "content": f"{preview}\n…[{size} bytes in total; full content at {ref}]",
            "metadata": {**message.metadata, "spilled": {"ref": ref, "bytes": size}},
        }
    )
    event = Event(
        type="output.spilled",
        event_id=f"{message.id}:spilled",
        timestamp=now_iso(),
        thread_id=message.thread_id,
        output_ref=ref,
        payload={
            "messageId": message.id,
            "bytes": size,
            "previewChars": len(preview),
            "role": message.role,
        },
        **ids,
    )
    return short, event
