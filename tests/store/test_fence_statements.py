"""A tool call's final write runs its fences and the events' idempotency check on the
driver's cursor (store/driver_sql.py), not through SQLAlchemy Core, whose IN-list
expansion and execution context cost a loaded worker about a millisecond of CPU a step
(docs/benchmarks.md, "Worker CPU per step"). Counted on the engine's cursor events, which
see every Core statement and none of the driver's; on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Text, cast, select
from sqlalchemy import event as sqlalchemy_event
from store_factories import event, message, new_thread_id, running_thread

from weft.store import Store
from weft.store.tables import events


def test_a_final_write_runs_its_checks_on_the_driver_cursor(store: Store) -> None:
    """No Core statement reads the thread's status, its stored tool results or its known
    events (the write's locks, inserts and other reads still go through Core)."""
    thread = new_thread_id()
    store.threads.upsert(running_thread(thread))
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    result = message(thread, 1, id="m1", role="tool", tool_call_id="c1", tool_status="success")
    outcome = event(thread, "c1:done", "tool.result", tool_call_id="c1", payload={})
    sqlalchemy_event.listen(store.engine, "before_cursor_execute", count)
    try:
        written = store.events.record([result], [outcome], unless_closed=True)
    finally:
        sqlalchemy_event.remove(store.engine, "before_cursor_execute", count)
    # The checks still ran and let the write through: the thread runs, the call had no
    # result stored, the event was new.
    assert [e.event_id for e in written] == ["c1:done"]
    assert store.messages.get(thread, "m1") is not None
    checks = [
        s
        for s in seen
        if "threads.status" in s  # the closed-thread fence
        or "messages.id IN" in s  # the stored-tool-result fence
        or "FROM events WHERE thread_id" in s  # the idempotency check, as driver SQL
        or "events.event_id IN" in s  # ... or as Core
    ]
    assert checks == [], checks
    assert seen, "the listener saw none of the write's statements"


def test_a_write_inserts_its_events_and_begins_on_the_driver(store: Store) -> None:
    """Every write's events INSERT, and SQLite's BEGIN of every transaction, run on the
    driver's connection, not through Core (store/events.py, store/urls.py); each event's
    data is stored as the text Core's JSON type made of it (`json.dumps` of its wire form),
    so the rows are the same."""
    thread = new_thread_id()
    store.threads.upsert(running_thread(thread))
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)

    batch = [
        event(thread, "e1", "tool.started", payload={"name": "add", "text": "é ü"}),
        event(thread, "e2", "tool.result", tool_call_id="c1", payload={"n": 1.5}),
    ]
    sqlalchemy_event.listen(store.engine, "before_cursor_execute", count)
    try:
        written = store.events.append(batch)
        with store.database.snapshot() as connection:
            stored: dict[str, str] = dict(
                connection.execute(
                    select(events.c.event_id, cast(events.c.data, Text)).where(
                        events.c.thread_id == thread
                    )
                ).all()
            )
    finally:
        sqlalchemy_event.remove(store.engine, "before_cursor_execute", count)
    assert [(e.event_id, e.sequence) for e in written] == [("e1", 1), ("e2", 2)]
    assert [s for s in seen if s.lstrip().upper().startswith(("INSERT INTO EVENTS", "BEGIN"))] == []
    assert stored == {e.event_id: json.dumps(e.to_wire()) for e in written}
    assert store.events.read(thread) == written
