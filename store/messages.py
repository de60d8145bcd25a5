"""A thread's messages in the store: append (idempotent), list, get, update and delete."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Select, delete, select, update

from weft.contract.messages import Message
from weft.store.database import Database
from weft.store.message_history import keep_versions
from weft.store.rows import message_to_row, row_to_message
from weft.store.tables import messages, transcript_revisions


class Messages:
    """Messages keyed by (thread_id, id), ordered by position; one transaction per call."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def append(self, messages_: Sequence[Message]) -> None:
        """Store `messages_` in one transaction, skipping any (thread_id, id) already stored."""
        rows = message_rows(messages_)
        if not rows:
            return
        with self._db.write() as connection:
            insert_messages(self._db, connection, rows)

    def list(
        self,
        thread_id: str,
        *,
        after_position: int = -1,
        limit: int | None = None,
        before_position: int | None = None,
        depth: int | None = None,
        parent_id: str | None = None,
    ) -> builtins.list[Message]:
        """The thread's messages with position > `after_position`, in position order.

        `before_position`, `depth` and `parent_id` narrow it: the main transcript is
        `depth=0`; a prompt tool's own messages are those with its call as `parent_id`.
        """
        query = select(messages).where(
            messages.c.thread_id == thread_id, messages.c.position > after_position
        )
        if before_position is not None:
            query = query.where(messages.c.position < before_position)
        if depth is not None:
            query = query.where(messages.c.depth == depth)
        if parent_id is not None:
            query = query.where(messages.c.parent_id == parent_id)
        query = transcript_order(query).limit(limit)
        with self._db.read() as connection:
            return [row_to_message(row) for row in connection.execute(query).mappings()]

    def get(self, thread_id: str, message_id: str) -> Message | None:
        """One message, or None when the thread has no message with that id."""
        with self._db.read() as connection:
            return _get(connection, thread_id, message_id)

    def get_many(self, thread_id: str, ids: Sequence[str]) -> builtins.list[Message]:
        """The thread's messages with these ids, in position order; unknown ids are skipped.

        Loads a compaction boundary's pinned messages in one query.
        """
        if not ids:
            return []
        with self._db.read() as connection:
            return messages_by_ids(connection, thread_id, ids)

    def update(self, thread_id: str, message_id: str, **changes: Any) -> Message | None:
        """Apply `changes` (validated as `Message` fields) and return the message, or None."""

        def once(connection: Connection) -> Message | None:
            return update_message(connection, thread_id, message_id, changes)

        return self._db.write_retrying(once)

    def delete(self, thread_id: str, message_id: str) -> bool:
        """Delete a message and the tool results answering its tool calls; False if absent."""

        def once(connection: Connection) -> bool:
            return bool(delete_message(connection, thread_id, message_id))

        return self._db.write_retrying(once)


# Transcript order: position, then write time, then id (positions are not unique: a stale
# attempt may write one again). The transcript cache's driver SQL orders by these too.
TRANSCRIPT_ORDER = (messages.c.position, messages.c.created_at, messages.c.id)


def transcript_order(query: Select[Any]) -> Select[Any]:
    """`query` over messages in transcript order (`TRANSCRIPT_ORDER`)."""
    return query.order_by(*TRANSCRIPT_ORDER)


def message_rows(messages_: Sequence[Message]) -> list[dict[str, Any]]:
    """The rows for `messages_`, one per (thread_id, id), the last duplicate winning."""
    return list({(m.thread_id, m.id): message_to_row(m) for m in messages_}.values())


def insert_messages(database: Database, connection: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert message rows in the caller's transaction, skipping those already stored."""
    connection.execute(database.insert_ignoring_duplicates(messages, ["thread_id", "id"]), rows)


def update_message(
    connection: Connection, thread_id: str, message_id: str, changes: dict[str, Any]
) -> Message | None:
    """Apply `changes` in the caller's write transaction; the message, or None if absent."""
    if {"id", "thread_id"} & changes.keys():
        raise ValueError("a message's id and thread_id cannot be changed")
    current = _get(connection, thread_id, message_id)
    if current is None:
        return None
    updated = Message.model_validate({**current.model_dump(), **changes})
    keep_versions(connection, thread_id, "updated", [current])
    connection.execute(
        update(messages)
        .where(messages.c.thread_id == thread_id, messages.c.id == message_id)
        .values(message_to_row(updated))
    )
    bump_transcript_revision(connection, thread_id)
    return updated


def delete_message(connection: Connection, thread_id: str, message_id: str) -> list[str]:
    """Delete a message and the tool results answering its tool calls, in the caller's
    write transaction; the ids deleted (the message's first), or [] when it is absent."""
    current = _get(connection, thread_id, message_id)
    if current is None:
        return []
    call_ids = [call.id for call in current.tool_calls or []]
    results = (
        messages.c.thread_id == thread_id,
        messages.c.role == "tool",
        messages.c.tool_call_id.in_(call_ids),
    )
    answered = (
        [
            row_to_message(row)
            for row in connection.execute(select(messages).where(*results)).mappings()
        ]
        if call_ids
        else []
    )
    answers = [answer.id for answer in answered]
    keep_versions(connection, thread_id, "deleted", [current, *answered])
    if answers:
        connection.execute(delete(messages).where(*results))
    connection.execute(
        delete(messages).where(messages.c.thread_id == thread_id, messages.c.id == message_id)
    )
    bump_transcript_revision(connection, thread_id)
    return [message_id, *answers]


def bump_transcript_revision(connection: Connection, thread_id: str) -> None:
    """Mark the thread's stored transcript as changed other than by an append, in the
    caller's write transaction: cached copies of it are reread whole."""
    bumped = connection.execute(
        update(transcript_revisions)
        .where(transcript_revisions.c.thread_id == thread_id)
        .values(revision=transcript_revisions.c.revision + 1)
    )
    if bumped.rowcount == 0:  # a race to insert the first row is retried by the writer
        connection.execute(transcript_revisions.insert().values(thread_id=thread_id, revision=1))


def get_message(connection: Connection, thread_id: str, message_id: str) -> Message | None:
    """One message read in the caller's transaction, or None."""
    return _get(connection, thread_id, message_id)


def _get(connection: Connection, thread_id: str, message_id: str) -> Message | None:
    query = select(messages).where(messages.c.thread_id == thread_id, messages.c.id == message_id)
    row = connection.execute(query).mappings().first()
    return None if row is None else row_to_message(row)


def messages_by_ids(connection: Connection, thread_id: str, ids: Sequence[str]) -> list[Message]:
    """The thread's messages with these ids, in position order, in one query."""
    if not ids:
        return []
    query = transcript_order(
        select(messages).where(messages.c.thread_id == thread_id, messages.c.id.in_(list(set(ids))))
    )
    return [row_to_message(row) for row in connection.execute(query).mappings()]
