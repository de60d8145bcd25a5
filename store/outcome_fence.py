"""Fences a write checks in its own transaction, so a late writer cannot record what is no
longer true: one outcome per tool call, and nothing for a closed thread.

A check made before the write would race the writer it guards against (the workflow's
record of an aborted call, the close of the thread); made inside the write transaction,
under the thread's lock, the first writer wins and the other writes nothing.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import Connection

from weft.contract.events import Event
from weft.store.database import Database
from weft.store.driver_sql import cursor_rows, placeholders

# The events that state a tool call's outcome, stored only with the result message they
# describe (see `answered_elsewhere`).
OUTCOME_EVENTS = frozenset({"tool.result", "tool.failed"})
# A thread in one of these statuses never runs again.
CLOSED_STATUSES = ("cancelled", "completed", "failed")

Answered = set[tuple[str, str]]


def answered_elsewhere(connection: Connection, rows: list[dict[str, Any]]) -> Answered:
    """(thread_id, tool_call_id) of the tool results in `rows` already stored: another writer
    (the workflow recording the call aborted, or an earlier attempt) stated that call's
    outcome first, so this write's outcome events for it are dropped."""
    results = [r for r in rows if r["role"] == "tool" and r["tool_call_id"]]
    if not results:
        return set()
    by_thread: dict[str, dict[str, str]] = {}
    for row in results:
        by_thread.setdefault(row["thread_id"], {})[row["id"]] = row["tool_call_id"]
    answered: Answered = set()
    # Every tool call's final write runs this: the driver's cursor (driver_sql.py), whose
    # IN list Core would expand and compile again on each call.
    for thread_id, calls in by_thread.items():
        stored = cursor_rows(
            connection,
            f"SELECT id FROM messages WHERE thread_id = ? AND id IN ({placeholders(len(calls))})",
            [thread_id, *calls],
        )
        answered.update((thread_id, calls[row[0]]) for row in stored)
    return answered


def without_outcomes(
    by_thread: dict[str, list[Event]], answered: Answered
) -> dict[str, list[Event]]:
    """`by_thread` less the outcome events of calls answered elsewhere."""
    if not answered:
        return by_thread
    kept = {
        thread_id: [
            e
            for e in batch
            if not (e.type in OUTCOME_EVENTS and (thread_id, e.tool_call_id) in answered)
        ]
        for thread_id, batch in by_thread.items()
    }
    return {thread_id: batch for thread_id, batch in kept.items() if batch}


def locked(database: Database, connection: Connection, thread_ids: Collection[str]) -> None:
    """Take the writers' lock of each thread (a fixed order cannot deadlock): the fences
    read under it, so no writer of those threads moves between their read and the write."""
    for thread_id in sorted(thread_ids):
        database.lock_thread(connection, thread_id)


def any_closed(connection: Connection, thread_ids: Collection[str]) -> bool:
    """Whether one of `thread_ids` has closed (its row says so)."""
    if not thread_ids:
        return False
    # Every final write runs this: the driver's cursor, as in `answered_elsewhere`.
    ids = list(thread_ids)
    found = cursor_rows(
        connection,
        f"SELECT thread_id FROM threads WHERE thread_id IN ({placeholders(len(ids))}) "
        f"AND status IN ({placeholders(len(CLOSED_STATUSES))}) LIMIT 1",
        [*ids, *CLOSED_STATUSES],
    )
    return bool(found)
