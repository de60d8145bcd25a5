"""A thread's event log in the store: numbered appends, one-commit records, reads."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from sqlalchemy import Connection, func, select, text

from weft.contract.events import Event
from weft.contract.messages import Message
from weft.store.budget_rows import LIMIT_CHANGED, project_budgets
from weft.store.database import Database
from weft.store.driver_sql import cursor_executemany, cursor_rows, placeholders
from weft.store.effect_rows import STATUS_OF_EVENT, project_effects
from weft.store.messages import (
    delete_message,
    get_message,
    insert_messages,
    message_rows,
    update_message,
)
from weft.store.outcome_fence import (
    answered_elsewhere,
    any_closed,
    locked,
    without_outcomes,
)
from weft.store.queue_rows import QUEUE_CHANGED, project_queue_depth
from weft.store.rows import row_to_event
from weft.store.subagents import SUBAGENT_EVENT_PREFIX, project_subagents
from weft.store.tables import events

# On PostgreSQL, each write that stores a thread's events notifies this channel with
# "<thread id> <last new sequence>"; it is delivered at commit (api/event_feed.py listens).
EVENTS_CHANNEL = "weft_events"
_NOTIFY = text("SELECT pg_notify(:channel, :message)")
# Every write inserts its events: on the driver's cursor (driver_sql.py), with each event's
# JSON made as Core's JSON type makes it (`json.dumps`, the engine sets no serializer), so
# the stored text is the same. Core spent about 0.3 ms of a loaded worker's CPU a write on
# its execution context and per-row parameter processing.
_INSERT_SQL = (
    "INSERT INTO events (thread_id, sequence, event_id, type, timestamp, data) "
    "VALUES (?, ?, ?, ?, ?, ?)"
)


class Events:
    """Events numbered per thread from 1, idempotent by (thread_id, event_id)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def append(self, events_: Sequence[Event]) -> list[Event]:
        """Store new events with the next sequence numbers of their thread; skip known ids.

        Returns only the events stored by this call, with `sequence` set. Writers of one
        thread are serialized (advisory lock on PostgreSQL, BEGIN IMMEDIATE on SQLite), and
        a transaction that still loses a race on a unique constraint is retried.
        """
        return self.record((), events_)

    def record(
        self,
        messages_: Sequence[Message],
        events_: Sequence[Event],
        *,
        unless_closed: bool = False,
    ) -> list[Event]:
        """Store messages and events in one transaction; both idempotent as above.

        Activities record what one phase produced with a single commit, since each commit
        is a disk flush. A tool call's outcome event is stored only with its result
        message: when that message is already stored, another writer stated the outcome
        first and this write's outcome events are dropped (outcome_fence.py). With
        `unless_closed` (an activity's late completion) nothing is written for a thread
        that has closed. Returns the newly stored events.
        """
        rows = message_rows(messages_)
        by_thread = events_by_thread(events_)
        if not rows and not by_thread:
            return []
        return self._db.write_retrying(
            lambda connection: self._record_once(connection, rows, by_thread, unless_closed)
        )

    def update_message(
        self, thread_id: str, message_id: str, changes: dict[str, Any], event: Event
    ) -> Message | None:
        """Change a stored message and record `event` about it, in one transaction.

        Idempotent by the event's id: when it is already stored, the change was made and
        the message is returned as it is now. None when the thread has no such message.
        """

        def once(connection: Connection) -> Message | None:
            self._db.lock_thread(connection, thread_id)
            if stored_event(connection, thread_id, event.event_id) is not None:
                return get_message(connection, thread_id, message_id)
            updated = update_message(connection, thread_id, message_id, changes)
            if updated is not None:
                insert_events(self._db, connection, {thread_id: [event]})
            return updated

        return self._db.write_retrying(once)

    def delete_message(self, thread_id: str, message_id: str, event: Event) -> list[str]:
        """Delete a message (and the tool results answering its calls) and record `event`
        with the ids deleted as `messageIds`, in one transaction; the ids, [] if absent.

        Idempotent by the event's id: when it is already stored, the deletion was made and
        the ids it recorded are returned.
        """

        def once(connection: Connection) -> list[str]:
            self._db.lock_thread(connection, thread_id)
            known = stored_event(connection, thread_id, event.event_id)
            if known is not None:
                return list(known.payload.get("messageIds") or [])
            deleted = delete_message(connection, thread_id, message_id)
            if deleted:
                payload = {**(event.payload or {}), "messageIds": deleted}
                recorded = event.model_copy(update={"payload": payload})
                insert_events(self._db, connection, {thread_id: [recorded]})
            return deleted

        return self._db.write_retrying(once)

    def read(
        self,
        thread_id: str,
        *,
        after: int = 0,
        limit: int = 500,
        types: Sequence[str] | None = None,
    ) -> list[Event]:
        """The thread's events with sequence > `after`, ascending, optionally of `types`."""
        query = select(events.c.data).where(
            events.c.thread_id == thread_id, events.c.sequence > after
        )
        if types is not None:
            query = query.where(events.c.type.in_(list(types)))
        query = query.order_by(events.c.sequence).limit(limit)
        with self._db.read() as connection:
            return [row_to_event(data) for data in connection.scalars(query)]

    def sequence_of(self, thread_id: str, event_id: str) -> int | None:
        """The sequence of one of the thread's events, None when it is not stored (yet)."""
        query = select(events.c.sequence).where(
            events.c.thread_id == thread_id, events.c.event_id == event_id
        )
        with self._db.read() as connection:
            return connection.scalar(query)

    def last_sequence(self, thread_id: str) -> int:
        """The thread's highest event sequence, or 0 when it has no events."""
        with self._db.read() as connection:
            return last_sequence(connection, thread_id)

    def last_sequences(self, thread_ids: Collection[str]) -> dict[str, int]:
        """The highest event sequence of each of `thread_ids` that has events, in one query
        (the API's poller asks this for every waited-for thread at once)."""
        if not thread_ids:
            return {}
        query = (
            select(events.c.thread_id, func.max(events.c.sequence))
            .where(events.c.thread_id.in_(list(thread_ids)))
            .group_by(events.c.thread_id)
        )
        with self._db.read() as connection:
            return {thread_id: int(last) for thread_id, last in connection.execute(query)}

    def _record_once(
        self,
        connection: Connection,
        rows: list[dict[str, Any]],
        by_thread: dict[str, list[Event]],
        unless_closed: bool,
    ) -> list[Event]:
        thread_ids = {r["thread_id"] for r in rows} | by_thread.keys()
        locked(self._db, connection, thread_ids)
        if unless_closed and any_closed(connection, thread_ids):
            return []
        if rows:
            by_thread = without_outcomes(by_thread, answered_elsewhere(connection, rows))
            insert_messages(self._db, connection, rows)
        return insert_events(self._db, connection, by_thread)


def events_by_thread(events_: Sequence[Event]) -> dict[str, list[Event]]:
    """`events_` grouped by thread in their order, each (thread_id, event_id) once."""
    by_thread: dict[str, list[Event]] = {}
    seen: set[tuple[str, str]] = set()
    for event in events_:
        if (event.thread_id, event.event_id) not in seen:
            seen.add((event.thread_id, event.event_id))
            by_thread.setdefault(event.thread_id, []).append(event)
    return by_thread


def insert_events(
    database: Database, connection: Connection, by_thread: dict[str, list[Event]]
) -> list[Event]:
    """Number and insert the events not yet stored, in the caller's write transaction.

    Each thread's lock is taken before its last sequence is read. Aggregates that store
    events with rows of their own (boundaries) call this too, so the numbering rules live
    in one place. Returns the newly stored events, with `sequence` set.
    """
    stored: list[Event] = []
    for thread_id in sorted(by_thread):  # a fixed lock order cannot deadlock
        database.lock_thread(connection, thread_id)
        batch = by_thread[thread_id]
        known, last = _known_and_last(connection, thread_id, [e.event_id for e in batch])
        fresh = [database.stamp_event(e) for e in batch if e.event_id not in known]
        if not fresh:
            continue
        fresh = database.thread_links.fill(connection, thread_id, fresh)
        # Numbered, and each one's row with its wire JSON made once, in one pass.
        numbered: list[Event] = []
        rows: list[tuple[str, int, str, str, str, str]] = []
        types: set[str] = set()
        subagent_events = False
        for i, event in enumerate(fresh, 1):
            event = event.model_copy(update={"sequence": last + i})
            numbered.append(event)
            types.add(event.type)
            subagent_events = subagent_events or event.type.startswith(SUBAGENT_EVENT_PREFIX)
            rows.append(
                (
                    event.thread_id,
                    last + i,
                    event.event_id,
                    event.type,
                    event.timestamp,
                    json.dumps(event.to_wire()),
                )
            )
        cursor_executemany(connection, _INSERT_SQL, rows)
        # Each projection only where its events are: most batches have none of them.
        if subagent_events:
            project_subagents(database, connection, numbered)
        if not types.isdisjoint(STATUS_OF_EVENT):
            project_effects(database, connection, numbered)
        if LIMIT_CHANGED in types:
            project_budgets(database, connection, numbered)
        if QUEUE_CHANGED in types:
            project_queue_depth(connection, numbered)
        database.note_stored(connection, numbered)
        if database.postgres:
            # Delivered at commit, so a listener never hears of a sequence it cannot read yet.
            connection.execute(
                _NOTIFY,
                {"channel": EVENTS_CHANNEL, "message": f"{thread_id} {numbered[-1].sequence}"},
            )
        stored.extend(numbered)
    return stored


def changes_rows(events_: Sequence[Event]) -> bool:
    """Whether storing `events_` changes more than the event log: rows a step may read
    (subagents, effects, budget ledgers, queue depth) are projected from events of these
    types, so a step must store them before it reads or runs (pending_events.py)."""
    return any(
        e.type.startswith(SUBAGENT_EVENT_PREFIX)
        or e.type in STATUS_OF_EVENT
        or e.type in (LIMIT_CHANGED, QUEUE_CHANGED)
        for e in events_
    )


def _known_and_last(
    connection: Connection, thread_id: str, event_ids: list[str]
) -> tuple[set[str], int]:
    """Which of `event_ids` (never empty: a thread's batch holds an event) the thread has
    stored, and its last sequence, in one query (every write runs it: on the driver's
    cursor, see driver_sql.py)."""
    sql = (
        "SELECT event_id, sequence FROM events WHERE thread_id = ? "
        f"AND event_id IN ({placeholders(len(event_ids))}) "
        "UNION ALL SELECT NULL, MAX(sequence) FROM events WHERE thread_id = ?"
    )
    rows = cursor_rows(connection, sql, [thread_id, *event_ids, thread_id])
    stored = {row[0] for row in rows if row[0] is not None}
    top = max((row[1] or 0 for row in rows if row[0] is None), default=0)
    return stored, int(top)


def stored_event(connection: Connection, thread_id: str, event_id: str) -> Event | None:
    """One of the thread's events as stored (an idempotent write's marker), or None."""
    data = connection.scalar(
        select(events.c.data).where(events.c.thread_id == thread_id, events.c.event_id == event_id)
    )
    return None if data is None else row_to_event(data)


def last_sequence(connection: Connection, thread_id: str) -> int:
    """The thread's highest event sequence seen by `connection`'s transaction, or 0."""
    query = select(func.max(events.c.sequence)).where(events.c.thread_id == thread_id)
    return int(connection.scalar(query) or 0)
