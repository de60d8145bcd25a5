"""The history of a thread's messages: each message as it was before every change of it.

A message is written once and then only changed by an update or a delete (ThreadState's
`update_message` and `delete_message`, hooks included: they all pass `store/messages.py`).
Each change first keeps the message as it was, tagged with the thread's last event
sequence when the change committed (`at_sequence`), as `kv_history` tags a key's writes. A
fork as of event P reads a message changed at or after P as the first row kept after P
holds it, and a message deleted after P comes back (docs/time-travel.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from sqlalchemy import Connection, func, select

from weft.contract.messages import Message
from weft.store.database import Database
from weft.store.rows import message_to_row
from weft.store.tables import events, message_history, messages

Change = Literal["updated", "deleted"]


def keep_versions(
    connection: Connection, thread_id: str, change: Change, before: Sequence[Message]
) -> None:
    """Keep `before`, the messages as they are until this change, in the change's transaction."""
    if not before:
        return
    # The tag is read in the insert itself (events.last_sequence as a subquery): the store
    # module that changes messages cannot import the events one, which imports it.
    at = (
        select(func.coalesce(func.max(events.c.sequence), 0))
        .where(events.c.thread_id == thread_id)
        .scalar_subquery()
    )
    connection.execute(
        message_history.insert().values(at_sequence=at),
        [
            {
                "thread_id": thread_id,
                "message_id": message.id,
                "change": change,
                "message": message_to_row(message),
            }
            for message in before
        ],
    )


def messages_as_of(database: Database, thread_id: str, sequence: int) -> list[Message]:
    """The thread's messages as they were right after event `sequence`, in transcript order:
    the stored ones, each changed or deleted at or after it as it was before that change.
    Messages written after the point are still listed (the caller keeps its turns')."""
    changed = (
        select(message_history.c.message_id, message_history.c.message)
        .where(
            message_history.c.thread_id == thread_id,
            message_history.c.at_sequence >= sequence,
        )
        .order_by(message_history.c.id)
    )
    current = select(messages).where(messages.c.thread_id == thread_id)
    with database.read() as connection:
        found = {
            row["id"]: Message.model_validate(dict(row))
            for row in connection.execute(current).mappings()
        }
        restored: dict[str, Message] = {}
        for message_id, data in connection.execute(changed):
            restored.setdefault(message_id, Message.model_validate(data))
    found.update(restored)
    return sorted(found.values(), key=_transcript_key)


def _transcript_key(message: Message) -> tuple[int, int, str]:
    """Transcript order in memory: position, write time, id (store/messages.py)."""
    return (message.position, message.created_at, message.id)
