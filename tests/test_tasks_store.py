"""The `tasks` table on SQLite and PostgreSQL: folded from the task's events in their
commit, idempotent, equal to a rebuild from the log; the graph and dependents reads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from weft.contract.events import Event
from weft.contract.tasks import (
    TaskError,
    TaskRecord,
    attempt_end_event_id,
    find_cycle,
    task_snapshot,
)
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


def _edge(task_id: str, n: int, depends_on: str, change: str = "added") -> Event:
    payload = {"dependsOn": depends_on, "change": change}
    return _event(task_id, n, "task.dependency.updated", payload)


def test_create_refuses_a_taken_id_and_a_cycle_naming_the_field(store: Store) -> None:
    """`create` checks the id and the graph in its own transaction; each refusal names
    the field and stores nothing."""
    a, b = "task-0000000000a1", "task-0000000000b1"
    store.tasks.create(_created(a, [b]))
    with pytest.raises(TaskError, match="exists already") as taken:
        store.tasks.create(_created(a))
    assert taken.value.field == "taskId"
    with pytest.raises(TaskError, match=f"dependency cycle: {b} → {a} → {b}") as cycle:
        store.tasks.create(_created(b, [a]))
    assert cycle.value.field == "dependencies" and store.tasks.get(b) is None
    assert store.tasks.events(b) == []


def test_links_change_the_row_and_refuse_cycles(store: Store) -> None:
    """An edge added or removed folds into the row; an edge that closes a cycle, one
    already there, or one not there to remove is refused naming `dependsOn`; a link
    stored once is not stored again."""
    a, b, c = "task-0000000000a2", "task-0000000000b2", "task-0000000000c2"
    store.tasks.record([_created(a), _created(b, [a]), _created(c, [b])])
    added = store.tasks.link(_edge(a, 1, "task-0000000000d2"))
    assert added is not None and added.sequence is not None
    assert store.tasks.link(_edge(a, 1, "task-0000000000d2")) is None
    refusals = [
        (_edge(a, 2, c), f"dependency cycle: {a} → {c} → {b} → {a}"),
        (_edge(b, 1, a), "depends on task-0000000000a2 already"),
        (_edge(b, 2, c, "removed"), "does not depend on"),
    ]
    for event, message in refusals:
        with pytest.raises(TaskError, match=message) as refused:
            store.tasks.link(event)
        assert refused.value.field == "dependsOn"
    store.tasks.link(_edge(b, 3, a, "removed"))
    assert store.tasks.graph()[b] == [] and store.tasks.graph()[a] == ["task-0000000000d2"]
    assert store.tasks.rebuild(b) == store.tasks.get(b)


def test_concurrent_links_cannot_close_a_cycle(store: Store) -> None:
    """Two links that each look fine alone but together close a cycle, made at once:
    the graph lock makes one wait for the other, which then sees the cycle."""
    a, b = "task-0000000000a3", "task-0000000000b3"
    store.tasks.record([_created(a), _created(b)])
    for round_ in range(5):
        barrier = threading.Barrier(2)

        def link(
            task_id: str, depends_on: str, n: int = round_, gate: threading.Barrier = barrier
        ) -> str:
            gate.wait()
            try:
                store.tasks.link(_edge(task_id, 10 + n, depends_on))
            except TaskError as err:
                return str(err)
            return "linked"

        with ThreadPoolExecutor(2) as pool:
            outcomes = sorted(pool.map(link, [a, b], [b, a]))
        assert outcomes[1] == "linked" and outcomes[0].startswith("dependency cycle"), outcomes
        graph = store.tasks.graph()
        linked = a if graph[a] else b
        store.tasks.link(_edge(linked, 100 + round_, b if linked == a else a, "removed"))


def test_lose_records_the_loss_unless_the_attempt_ended(store: Store) -> None:
    """`lose` stores an attempt's lost end and `task.lost` together; when the attempt's
    end was stored first, it stores nothing and returns that end."""
    task_id = "task-0000000000e4"
    attempt = {"attemptId": f"{task_id}.a1", "number": 1, "runId": "r", "threadId": "t"}
    started = _event(task_id, 1, "task.attempt.started", {"attempt": {**attempt, "startedAt": AT}})
    store.tasks.record([_created(task_id), started])
    end = Event.model_validate(
        {
            **_event(task_id, 2, "task.attempt.failed", {}).model_dump(),
            "event_id": attempt_end_event_id(f"{task_id}.a1"),
            "payload": {"attempt": {"attemptId": f"{task_id}.a1", "status": "lost"}},
        }
    )
    lost = _event(task_id, 3, "task.lost", {"reason": "no heartbeat"})
    assert store.tasks.lose(end, lost) is None
    row = store.tasks.get(task_id)
    assert row is not None and row.status == "lost" and row.attempts[0].status == "lost"
    assert [r.task_id for r in task_snapshot([row]).lost] == [task_id]
    again = _event(task_id, 4, "task.lost", {"reason": "again"})
    known = store.tasks.lose(end, again)
    assert known is not None and known.payload["attempt"]["status"] == "lost"
    assert [e.type for e in store.tasks.events(task_id)].count("task.lost") == 1


def _closed(task_id: str, run_id: str) -> Event:
    """The end a reader records for run `run_id` closed through Temporal (client/tasks.py)."""
    return Event.model_validate(
        {
            "type": "task.failed",
            "eventId": f"{task_id}:{run_id}:closed",
            "timestamp": AT,
            "threadId": task_id,
            "taskId": task_id,
            "runId": run_id,
            "payload": {
                "reason": "its run was terminated through Temporal",
                "closedAs": "terminated",
            },
        }
    )


def test_a_recorded_end_never_ends_a_newer_run(store: Store) -> None:
    """A reader describes run r1 as terminated, then writes its end: stored when the log's
    last writer is r1 (or r1 wrote nothing), refused once a retry's run r2 has written
    after r1's own end, which a describe that came first cannot see."""
    ended_by_itself, cut_off, silent = "task-00000000001a", "task-00000000001b", "task-00000000001c"
    for task_id in (ended_by_itself, cut_off, silent):
        store.tasks.record([_created(task_id)])
    # r1 wrote its own end, was then terminated before returning, and a retry's r2 began.
    store.tasks.record(
        [
            _event(ended_by_itself, 1, "task.started", {}, runId="r1"),
            _event(ended_by_itself, 2, "task.failed", {"reason": "no"}, runId="r1"),
            _event(ended_by_itself, 3, "task.retrying", {"reason": "retried"}, runId="r2"),
        ]
    )
    assert store.tasks.record_end(ended_by_itself, [_closed(ended_by_itself, "r1")]) is False
    row = store.tasks.get(ended_by_itself)
    assert row is not None and row.status == "retrying"
    # r1 was terminated while it ran: its end is recorded.
    store.tasks.record([_event(cut_off, 1, "task.started", {}, runId="r1")])
    assert store.tasks.record_end(cut_off, [_closed(cut_off, "r1")]) is True
    row = store.tasks.get(cut_off)
    assert row is not None and row.status == "failed"
    # r2 was terminated before its first write: the log's writes are r1's, and its end
    # is recorded.
    store.tasks.record([_event(silent, 1, "task.started", {}, runId="r1")])
    assert store.tasks.record_end(silent, [_closed(silent, "r2")]) is True
    row = store.tasks.get(silent)
    assert row is not None and row.status == "failed"
