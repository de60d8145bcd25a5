"""Tasks in the store: each task's `task.*` events under the task id, and the `tasks` row
folded from them (`contract.tasks.apply_event`) in the commit that stores them.

The row is a cache of the log: `rebuild` folds the log alone, and a retried write stores
nothing twice (events are idempotent by id, and only newly stored events are folded).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, select

from weft.contract.events import Event
from weft.contract.tasks import (
    TERMINAL_STATUSES,
    TaskError,
    TaskRecord,
    apply_event,
    find_cycle,
    rebuild,
)
from weft.contract.tenants import DEFAULT_TENANT
from weft.store.database import Database
from weft.store.events import insert_events
from weft.store.rows import row_to_event
from weft.store.run_order import written_after_run
from weft.store.tables import events, tasks

_READ_LIMIT = 10_000
# Every change to the dependency graph takes this lock first, so a cycle check and the
# edge it allows are one step: two links that each look fine alone cannot close a cycle.
_GRAPH_LOCK = "weft:tasks:graph"


class Tasks:
    """Write a task's events with its row; read rows, the graph, and the log."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def record(self, events_: Sequence[Event]) -> list[Event]:
        """Store `events_` (each under its task id, `thread_id` being the log key) and fold
        the newly stored ones into their rows; returns the newly stored events."""
        by_task: dict[str, list[Event]] = {}
        for event in events_:
            by_task.setdefault(event.thread_id, []).append(event)
        if not by_task:
            return []

        def once() -> list[Event]:
            with self._db.write() as connection:
                stored = insert_events(self._db, connection, by_task)
                for task_id in sorted(by_task):
                    _fold(
                        self._db, connection, task_id, [e for e in stored if e.thread_id == task_id]
                    )
                return stored

        return self._db.retrying(once)

    def create(self, created: Event) -> TaskRecord:
        """Store a task's `task.created` and its row, unless its id is taken or its
        dependencies close a cycle (checked in the same transaction): TaskError naming
        the field."""
        record = TaskRecord.model_validate(created.payload["task"])

        def once() -> None:
            with self._db.write() as connection:
                self._db.lock_thread(connection, _GRAPH_LOCK)
                taken = select(tasks.c.task_id).where(tasks.c.task_id == record.task_id)
                if connection.scalar(taken) is not None:
                    raise TaskError(f"task {record.task_id} exists already", field="taskId")
                graph = {**_graph(connection), record.task_id: record.dependencies}
                _refuse_cycle(record.task_id, graph, "dependencies")
                stored = insert_events(self._db, connection, {record.task_id: [created]})
                _fold(self._db, connection, record.task_id, stored)

        self._db.retrying(once)
        return record

    def link(self, event: Event) -> Event | None:
        """Store a `task.dependency.updated` edge change with its row, checked against the
        graph in the same transaction: TaskError naming why when the edge is refused (a
        cycle, an edge already there or not there). Returns the event as stored (None when
        it was stored before: a retried write)."""
        task_id, payload = event.thread_id, event.payload or {}
        edge, added = str(payload["dependsOn"]), payload.get("change") == "added"

        def once() -> Event | None:
            with self._db.write() as connection:
                self._db.lock_thread(connection, _GRAPH_LOCK)
                if _event_stored(connection, task_id, event.event_id):
                    return None
                graph = _graph(connection)
                if task_id not in graph:
                    raise TaskError(f"no task {task_id!r}", field="taskId")
                known = graph[task_id]
                if added and edge in known:
                    raise TaskError(f"task {task_id} depends on {edge} already", field="dependsOn")
                if not added and edge not in known:
                    raise TaskError(f"task {task_id} does not depend on {edge}", field="dependsOn")
                if added:
                    _refuse_cycle(task_id, {**graph, task_id: [*known, edge]}, "dependsOn")
                stored = insert_events(self._db, connection, {task_id: [event]})
                _fold(self._db, connection, task_id, stored)
                return stored[0] if stored else None

        return self._db.retrying(once)

    def lose(self, attempt_end: Event, lost: Event) -> Event | None:
        """Record an attempt as lost (its end and `task.lost`, one commit) unless its end
        is stored already: then nothing is written and that stored end is returned (the
        lost worker wrote it before it died, so the attempt's outcome is known)."""
        task_id = lost.thread_id

        def once() -> Event | None:
            with self._db.write() as connection:
                self._db.lock_thread(connection, task_id)
                query = select(events.c.data).where(
                    events.c.thread_id == task_id, events.c.event_id == attempt_end.event_id
                )
                known = connection.scalar(query)
                if known is not None:
                    return row_to_event(known)
                stored = insert_events(self._db, connection, {task_id: [attempt_end, lost]})
                _fold(self._db, connection, task_id, stored)
                return None

        return self._db.retrying(once)

    def record_end(self, task_id: str, end: Sequence[Event]) -> bool:
        """Store a task's end that its run did not write (its run was closed through
        Temporal: the running attempt's end, then the task's), unless the task has ended
        already: a run that wrote its own end, or another reader that recorded this one
        first, leaves nothing to write; nor does a newer run's write (a retry that began
        after the closed run wrote its own end: `written_after_run`). One transaction,
        under the task's lock (every writer of its log takes it); True when the task's end
        was stored."""
        closed_run = end[-1].run_id

        def once() -> bool:
            with self._db.write() as connection:
                self._db.lock_thread(connection, task_id)
                status = connection.scalar(select(tasks.c.status).where(tasks.c.task_id == task_id))
                if status is None or status in TERMINAL_STATUSES:
                    return False
                if closed_run and written_after_run(connection, task_id, closed_run):
                    return False
                stored = insert_events(self._db, connection, {task_id: list(end)})
                _fold(self._db, connection, task_id, stored)
                return any(e.event_id == end[-1].event_id for e in stored)

        return self._db.retrying(once)

    def get(self, task_id: str) -> TaskRecord | None:
        """The task's row, or None when no such task was created."""
        with self._db.read() as connection:
            data = connection.scalar(select(tasks.c.data).where(tasks.c.task_id == task_id))
        return None if data is None else TaskRecord.model_validate(data)

    def tenant(self, task_id: str) -> str | None:
        """The tenant the task belongs to, or None when there is no such task."""
        with self._db.read() as connection:
            found: str | None = connection.scalar(
                select(tasks.c.tenant).where(tasks.c.task_id == task_id)
            )
        return found

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        session_id: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> builtins.list[TaskRecord]:
        """Tasks, most recently changed first, optionally of `statuses`, one session or
        one tenant."""
        query = select(tasks.c.data).order_by(tasks.c.updated_at.desc(), tasks.c.task_id)
        if tenant is not None:
            query = query.where(tasks.c.tenant == tenant)
        if statuses is not None:
            query = query.where(tasks.c.status.in_(list(statuses)))
        if session_id is not None:
            query = query.where(tasks.c.session_id == session_id)
        with self._db.read() as connection:
            rows = connection.scalars(query.limit(limit))
            return [TaskRecord.model_validate(data) for data in rows]

    def statuses(self, task_ids: Sequence[str]) -> dict[str, str]:
        """The status of each of `task_ids` that exists."""
        query = select(tasks.c.task_id, tasks.c.status).where(tasks.c.task_id.in_(list(task_ids)))
        with self._db.read() as connection:
            return {task_id: status for task_id, status in connection.execute(query)}

    def graph(self) -> dict[str, builtins.list[str]]:
        """Every task's dependencies (task id → the ids it depends on)."""
        with self._db.read() as connection:
            return _graph(connection)

    def dependents(self, task_id: str) -> builtins.list[str]:
        """The unfinished tasks that depend on `task_id`."""
        query = select(tasks.c.data).where(tasks.c.status.not_in(list(TERMINAL_STATUSES)))
        with self._db.read() as connection:
            rows = connection.scalars(query)
            return [str(d["taskId"]) for d in rows if task_id in (d.get("dependencies") or [])]

    def events(self, task_id: str, *, after: int = 0) -> builtins.list[Event]:
        """The task's log, oldest first."""
        query = (
            select(events.c.data)
            .where(events.c.thread_id == task_id, events.c.sequence > after)
            .order_by(events.c.sequence)
            .limit(_READ_LIMIT)
        )
        with self._db.read() as connection:
            return [row_to_event(data) for data in connection.scalars(query)]

    def rebuild(self, task_id: str) -> TaskRecord | None:
        """The task as its log alone says (the row is a cache of this)."""
        return rebuild([e.to_wire() for e in self.events(task_id)])


def _graph(connection: Connection) -> dict[str, list[str]]:
    rows = connection.scalars(select(tasks.c.data))
    return {str(d["taskId"]): list(d.get("dependencies") or []) for d in rows}


def _refuse_cycle(task_id: str, graph: dict[str, list[str]], field: str) -> None:
    cycle = find_cycle(task_id, graph)
    if cycle is not None:
        raise TaskError(f"dependency cycle: {' → '.join(cycle)}", field=field)


def _event_stored(connection: Connection, task_id: str, event_id: str) -> bool:
    query = select(events.c.event_id).where(
        events.c.thread_id == task_id, events.c.event_id == event_id
    )
    return connection.scalar(query) is not None


def _fold(database: Database, connection: Connection, task_id: str, fresh: list[Event]) -> None:
    """Fold newly stored events into the task's row, in the caller's transaction."""
    if not fresh:
        return
    data = connection.scalar(select(tasks.c.data).where(tasks.c.task_id == task_id))
    record = None if data is None else TaskRecord.model_validate(data)
    for event in fresh:
        record = apply_event(record, event.to_wire())
    if record is None:
        return  # events of a task whose task.created is not stored: nothing to fold into
    now = datetime.now(UTC)
    values = {
        "status": record.status,
        "assignee": record.assignee,
        "session_id": record.scope.session_id,
        "data": record.model_dump(mode="json"),
        "updated_at": now,
    }
    # The tenant and the creating thread are the created task's, never changed by a
    # later event (a task's scope is fixed at its creation).
    insert = database.insert(tasks).values(
        task_id=task_id,
        created_at=now,
        tenant=record.scope.tenant or DEFAULT_TENANT,
        created_by_thread=record.scope.thread_id,
        **values,
    )
    connection.execute(insert.on_conflict_do_update(index_elements=["task_id"], set_=values))
