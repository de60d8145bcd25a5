"""Large outputs stay out of Temporal payloads: the store keeps the full text, history a
preview and a ref (`output.spilled`). Large queued messages travel the other way: the
client stores the text as a blob and signals a preview with `metadata.contentRef`.

Temporal rejects payloads over 2 MB, and large ones bloat every replay. The activity that
produced an output has already written it whole to the store, so the copy it returns into
history can be short; the model still reads the full text from the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from weft.activities.clock import now_iso
from weft.contract.events import Event
from weft.contract.messages import Message

if TYPE_CHECKING:
    from weft.store.protocols import HasFiles

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
            # A parsed structured answer is the content again: the store keeps it.
            "metadata": {
                **{k: v for k, v in message.metadata.items() if k != "parsed"},
                "spilled": {"ref": ref, "bytes": size},
            },
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
            # A prompt tool's message: the call that runs it, so a client can fold it.
            **(
                {"parentToolCallId": message.parent_id, "depth": message.depth}
                if message.depth
                else {}
            ),
        },
        **ids,
    )
    return short, event


# -- queued messages over the threshold (their content travels as a blob) ---------------

BLOB_REF_PREFIX = "blob:"
# The metadata key of a queued message whose content travels as a blob.
CONTENT_REF = "contentRef"


def may_spill(content: str) -> bool:
    """Whether `content` can be over the spill threshold, without encoding it: UTF-8 takes
    at most 4 bytes a character, so shorter text never is (and needs no store)."""
    return len(content) * 4 > SPILL_THRESHOLD_BYTES


def spill_queued_content(store: HasFiles, content: str) -> tuple[str, dict[str, Any]]:
    """For a message about to be queued: (content, metadata) to send instead.

    Content over the threshold is stored as a blob; the message carries a preview and
    `metadata.contentRef` (`blob:<sha256>`), which `resolve_content_refs` turns back into
    the full text when the message is written to the store.
    """
    data = content.encode("utf-8")
    if len(data) <= SPILL_THRESHOLD_BYTES:
        return content, {}
    ref = BLOB_REF_PREFIX + store.files.put_blob(data)
    preview = content[:PREVIEW_CHARS]
    note = f"\n…[{len(data)} bytes in total; the full content is stored as {ref}]"
    return preview + note, {CONTENT_REF: ref, "contentBytes": len(data)}


def resolve_content_refs(
    store: HasFiles, messages: Sequence[Message], events: Sequence[Event]
) -> tuple[list[Message], list[Event]]:
    """Messages with `metadata.contentRef` get their full content back from the store.

    Returns the messages to write and the events with one `output.spilled` per resolved
    message, or a `runtime.warning` when the blob is missing or not UTF-8 text: then the
    content says so in place of the text, and the thread goes on.
    """
    resolved: list[Message] = []
    extra: list[Event] = []
    for message in messages:
        ref = message.metadata.get(CONTENT_REF)
        if not isinstance(ref, str):
            resolved.append(message)
            continue
        content, event = _resolve(store, message, ref)
        resolved.append(message.model_copy(update={"content": content}))
        extra.append(event)
    return resolved, [*events, *extra]


def _resolve(store: HasFiles, message: Message, ref: str) -> tuple[str, Event]:
    ids = {"thread_id": message.thread_id, "turn_id": message.turn_id}
    data = store.files.get_blob(ref[len(BLOB_REF_PREFIX) :]) if _is_blob(ref) else None
    try:
        text = None if data is None else data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:
        problem = f"the content of message {message.id} could not be loaded: {ref} " + (
            "is not UTF-8 text" if data is not None else "is not in the store"
        )
        warning = Event(
            type="runtime.warning",
            event_id=f"{message.id}:content_ref",
            timestamp=now_iso(),
            payload={"code": "content_ref_unavailable", "message": problem, "ref": ref},
            **ids,
        )
        return f"[weft: {problem}; only a preview was kept]\n{message.content or ''}", warning
    spilled = Event(
        type="output.spilled",
        event_id=f"{message.id}:spilled",
        timestamp=now_iso(),
        output_ref=message_ref(message),
        payload={
            "messageId": message.id,
            "bytes": len(data or b""),
            "previewChars": len(message.content or ""),
            "role": message.role,
            "contentRef": ref,
        },
        **ids,
    )
    return text, spilled


def _is_blob(ref: str) -> bool:
    digest = ref[len(BLOB_REF_PREFIX) :]
    return (
        ref.startswith(BLOB_REF_PREFIX)
        and len(digest) == 64
        and all(c in "0123456789abcdef" for c in digest)
    )
