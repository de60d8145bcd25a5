"""`tasks.created_by_thread` (migration 0020): tasks made before it are filled from their
JSON `scope.threadId`, new ones get it at creation, and `tasks_created_by` reads it by its
index rather than scanning every task's JSON, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, event, text

from weft.contract.events import Event
from weft.contract.tasks import TaskRecord
from weft.store import Store
from weft.store.migrate import upgrade
from weft.store.tables import tasks
from weft.store.urls import create_store_engine

AT = "2026-11-27T10:00:00.000Z"


def _record(task_id: str, scope: dict[str, Any]) -> TaskRecord:
    return TaskRecord.model_validate(
        {
            "taskId": task_id,
            "objective": "Do it.",
            "assignee": "helper",
            "scope": scope,
            "createdAt": AT,
            "updatedAt": AT,
        }
    )


def _old_row(engine: Engine, record: TaskRecord) -> None:
    """A task row as the store wrote it before migration 0020 (no creator column)."""
    now = datetime.now(UTC)
    with engine.begin() as connection:
        connection.execute(
            tasks.insert().values(
                task_id=record.task_id,
                status=record.status,
                assignee=record.assignee,
                session_id=record.scope.session_id,
                data=record.model_dump(mode="json"),
                created_at=now,
                updated_at=now,
            )
        )


def _create(store: Store, record: TaskRecord) -> None:
    store.tasks.create(
        Event.model_validate(
            {
                "type": "task.created",
                "eventId": f"{record.task_id}:created",
                "timestamp": AT,
                "threadId": record.task_id,
                "taskId": record.task_id,
                "payload": {"task": record.model_dump(mode="json")},
            }
        )
    )


def _creators(engine: Engine) -> dict[str, str | None]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT task_id, created_by_thread FROM tasks"))
        return {task_id: creator for task_id, creator in rows}


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_databases: Callable[[], str]
) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return postgres_databases()


def test_existing_tasks_are_filled_and_new_ones_written(store_url: str) -> None:
    """Rows from before 0020 get their creator from the JSON (none for a task without a
    thread); a task created after it has the column written with its row; the read finds
    both kinds, oldest first, and no other thread's."""
    engine = create_store_engine(store_url)
    try:
        upgrade(engine, "0019")
        _old_row(engine, _record("task-aaaaaaaaaaaa", {"threadId": "boss-1", "sessionId": "s"}))
        _old_row(engine, _record("task-bbbbbbbbbbbb", {"sessionId": "s"}))
        _old_row(engine, _record("task-cccccccccccc", {"threadId": "other-1"}))
        upgrade(engine)
        assert _creators(engine) == {
            "task-aaaaaaaaaaaa": "boss-1",
            "task-bbbbbbbbbbbb": None,
            "task-cccccccccccc": "other-1",
        }
    finally:
        engine.dispose()
    with Store.open(store_url) as store:
        _create(store, _record("task-dddddddddddd", {"threadId": "child-1"}))
        _create(store, _record("task-eeeeeeeeeeee", {}))
        creators = _creators(store.engine)
        assert creators["task-dddddddddddd"] == "child-1"
        assert creators["task-eeeeeeeeeeee"] is None
        found = store.subagents.tasks_created_by(["boss-1", "child-1"])
        assert [t["taskId"] for t in found] == ["task-aaaaaaaaaaaa", "task-dddddddddddd"]


def test_the_read_uses_the_creator_index(tmp_path: Path) -> None:
    """SQLite's plan for the read is a search of `ix_tasks_created_by_thread`, not a scan
    of every task (the JSON path could use no index)."""
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}") as store:
        seen: list[str] = []

        def capture(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
            if "FROM tasks" in statement and "EXPLAIN" not in statement:
                seen.append(statement)

        event.listen(store.engine, "before_cursor_execute", capture)
        store.subagents.tasks_created_by(["boss-1"])
        event.remove(store.engine, "before_cursor_execute", capture)
        [statement] = seen
        with store.engine.connect() as connection:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", ("boss-1",)).all()
        details = " ".join(str(row[-1]) for row in plan)
        assert "ix_tasks_created_by_thread" in details, details
