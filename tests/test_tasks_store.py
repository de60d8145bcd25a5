"""The `tasks` table on SQLite and PostgreSQL: folded from the task's events in their
commit, idempotent, equal to a rebuild from the log; the graph and dependents reads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from weft.contract.events import Event
from weft.contract.tasks import TaskRecord, find_cycle
from weft.store import Store

AT = "2026-11-27T10:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    postgres_databases: Callable[[], str],
) -> Iterator[Store]:
    """A fresh migrated store on each backend."""
    url = (
        f"sqlite:///{tmp_path / 'tasks.db'}" if request.param == "sqlite" else postgres_databases()
    )
    opened = Store.open(url)
    try:
        yield opened
    finally:
        opened.close()


def _event(task_id: str, n: int, kind: str, payload: dict[str, Any], **extra: Any) -> Event:
    return Event.model_validate(
        {
            "type": kind,
            "eventId": f"{task_id}:{n}",
            "timestamp": AT,
            "threadId": task_id,
            "taskId": task_id,
            "payload": payload,
            **extra,
        }
    )


def _created(task_id: str, dependencies: list[str] | None = None) -> Event:
    record = TaskRecord(
        task_id=task_id,
        objective="Do it.",
        assignee="helper",
        dependencies=dependencies or [],
        created_at=AT,
        updated_at=AT,
    )
    return _event(task_id, 0, "task.created", {"task": record.model_dump(mode="json")})


def test_row_is_folded_from_events_and_equals_the_rebuild(store: Store) -> None:
    """Storing a task's events folds its row; storing them again changes nothing; the row
    equals the fold of the log alone."""
    task_id = "task-aaaaaaaaaaaa"
    attempt = {
        "attemptId": f"{task_id}.a1",
        "number": 1,
        "runId": "r1",
        "threadId": "t1",
        "startedAt": AT,
    }
    events = [
        _created(task_id),
        _event(task_id, 1, "task.queued", {"waitingOn": []}),
        _event(task_id, 2, "task.started", {}),
        _event(task_id, 3, "task.attempt.started", {"attempt": attempt}),
        _event(task_id, 4, "task.progress", {"progress": {"message": "half", "at": AT}}),
        _event(
            task_id,
            5,
            "task.attempt.failed",
            {"attempt": {"attemptId": f"{task_id}.a1", "status": "failed", "error": "bad"}},
        ),
        _event(task_id, 6, "task.failed", {"reason": "1 attempt(s) failed"}),
    ]
    assert len(store.tasks.record(events)) == 7
    assert store.tasks.record(events) == []
    row = store.tasks.get(task_id)
    assert row is not None and row.status == "failed" and row.reason == "1 attempt(s) failed"
    assert [(a.status, a.error) for a in row.attempts] == [("failed", "bad")]
    assert [p.message for p in row.progress] == ["half"] and row.delivery.state == "none"
    assert store.tasks.rebuild(task_id) == row
    assert store.tasks.statuses([task_id, "task-bbbbbbbbbbbb"]) == {task_id: "failed"}
    assert [r.task_id for r in store.tasks.list(statuses=["failed"])] == [task_id]


def test_graph_and_dependents(store: Store) -> None:
    """The graph lists every task's dependencies; dependents are the unfinished tasks
    that wait on a task."""
    a, b, c = "task-00000000000a", "task-00000000000b", "task-00000000000c"
    store.tasks.record([_created(a), _created(b, [a]), _created(c, [a])])
    store.tasks.record([_event(c, 1, "task.cancelled", {"reason": "no"})])
    assert store.tasks.graph() == {a: [], b: [a], c: [a]}
    assert store.tasks.dependents(a) == [b]
    assert find_cycle(a, {**store.tasks.graph(), a: [c]}) == [a, c, a]


def test_events_of_an_unknown_task_fold_nothing(store: Store) -> None:
    """Events stored before their task.created leave no row (nothing to fold into)."""
    task_id = "task-cccccccccccc"
    store.tasks.record([_event(task_id, 1, "task.queued", {"waitingOn": []})])
    assert store.tasks.get(task_id) is None


def test_an_attempt_end_without_its_start_changes_no_attempt(store: Store) -> None:
    """The end of an attempt whose start was never stored is kept in the log but adds no
    attempt to the row (a cancelled run may not have written the start)."""
    task_id = "task-dddddddddddd"
    ended = {"attemptId": f"{task_id}.a1", "status": "cancelled", "error": "stop"}
    store.tasks.record([_created(task_id)])
    store.tasks.record([_event(task_id, 1, "task.attempt.failed", {"attempt": ended})])
    row = store.tasks.get(task_id)
    assert row is not None and row.attempts == []
    assert [e.type for e in store.tasks.events(task_id)] == ["task.created", "task.attempt.failed"]
