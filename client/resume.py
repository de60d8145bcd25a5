"""Read models for clients that reconnect: the snapshot first, then events after a cursor.

A live thread answers the `thread_read` and `session_snapshot` queries. A closed thread
(or one no worker can answer for) is read from the store: the workflow writes its read
model as a `snapshot.updated` event whenever it goes idle and when it closes.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from temporalio.client import Client

from weft.client.lineage import with_lineage
from weft.client.liveness import QUERY_TIMEOUT, UNANSWERED, is_running
from weft.client.stored_snapshots import stored_snapshot
from weft.client.threads import tail_events
from weft.contract.events import Event
from weft.contract.read_models import session_snapshot
from weft.contract.thread import QUERY_SESSION_SNAPSHOT, QUERY_THREAD_READ, ThreadRead
from weft.store import Store

FINAL_STATUSES = ("completed", "cancelled", "failed")


def thread_read_from_store(store: Store, thread_id: str) -> ThreadRead | None:
    """The last read model the thread wrote, or None if it never wrote one."""
    latest = stored_snapshot(store, thread_id, "thread_read")
    if latest is None:
        return None
    return ThreadRead.model_validate(latest.payload["threadRead"])


def session_snapshot_from_store(
    store: Store, thread_id: str, *, before: int | None = None, limit: int = 50
) -> dict[str, Any] | None:
    """The session snapshot from the store, with message content; None for an unknown thread.

    A thread that has not closed may have moved on since it wrote its read model, so its
    snapshot says `stale` rather than pretend to be current.
    """
    read = thread_read_from_store(store, thread_id)
    if read is None:
        return None
    messages = store.messages.list(thread_id)
    older = [m for m in messages if before is None or m.position < before]
    window = older[-limit:]
    return session_snapshot(
        read,
        [m.model_dump(mode="json") for m in window],
        older_cursor=window[0].position if window and len(older) > len(window) else None,
        total_messages=len(messages),
        stale=read.status not in FINAL_STATUSES,
    )


async def thread_read(client: Client, store: Store, thread_id: str) -> ThreadRead | None:
    """The live read model by query, or the stored one when the thread cannot answer; with
    its fork links (client/lineage.py), which only the store knows."""
    read = await _live_or_stored(client, store, thread_id)
    return None if read is None else await asyncio.to_thread(with_lineage, store, read)


async def _live_or_stored(client: Client, store: Store, thread_id: str) -> ThreadRead | None:
    if await is_running(client, thread_id):
        try:
            # The converter builds the model (`result_type`); this passes it through, typed.
            return ThreadRead.model_validate(
                await client.get_workflow_handle(thread_id).query(
                    QUERY_THREAD_READ, result_type=ThreadRead, rpc_timeout=QUERY_TIMEOUT
                )
            )
        except UNANSWERED:
            pass  # no worker answered: fall back to what the thread last wrote
    return await asyncio.to_thread(thread_read_from_store, store, thread_id)


async def snapshot(
    client: Client, store: Store, thread_id: str, *, before: int | None = None, limit: int = 50
) -> dict[str, Any] | None:
    """The session snapshot by query, or from the store when the thread cannot answer; either
    way the window's messages carry their stored content."""
    page: dict[str, Any] = {"limit": limit}
    if before is not None:
        page["before"] = before
    if await is_running(client, thread_id):
        try:
            found: dict[str, Any] = await client.get_workflow_handle(thread_id).query(
                QUERY_SESSION_SNAPSHOT, page, rpc_timeout=QUERY_TIMEOUT
            )
            await asyncio.to_thread(_with_stored_content, store, thread_id, found)
            return found
        except UNANSWERED:
            pass  # no worker answered: fall back to what the thread last wrote
    return await asyncio.to_thread(
        session_snapshot_from_store, store, thread_id, before=before, limit=limit
    )


def _with_stored_content(store: Store, thread_id: str, found: dict[str, Any]) -> None:
    """Fill in the content of the window's messages from the store.

    A live thread's snapshot comes from the workflow, which keeps ids and roles, never
    content; a client showing a transcript would otherwise read each message on its own.
    A message the store does not hold yet (queued, not taken by a step) stays as it is.
    """
    window = [
        message
        for thread in found.get("threads", [])
        for message in thread.get("history", {}).get("messages", [])
    ]
    missing = [m["id"] for m in window if isinstance(m, dict) and "content" not in m]
    if not missing:
        return
    stored = {m.id: m for m in store.messages.get_many(thread_id, missing)}
    for entry in window:
        message = stored.get(entry.get("id"))
        if message is not None:
            entry.update(message.model_dump(mode="json", by_alias=True), **_meta(entry))


def _meta(entry: dict[str, Any]) -> dict[str, Any]:
    """What the workflow's entry knows that the stored row may word differently."""
    return {key: entry[key] for key in ("position", "depth", "parentId") if key in entry}


@dataclass
class Resumed:
    """What a reconnecting client gets: a snapshot, then the events after its cursor."""

    snapshot: dict[str, Any] | None
    events: AsyncIterator[Event]


async def reconnect(
    client: Client, store: Store, thread_id: str, *, after: int, follow: bool = True
) -> Resumed:
    """Resume a client that acknowledged events up to sequence `after`.

    The snapshot is taken first, so every fact after it arrives as an event; an event may
    repeat what the snapshot already shows, never the other way round.
    """
    current = await snapshot(client, store, thread_id)
    return Resumed(current, tail_events(store, thread_id, after=after, follow=follow))
