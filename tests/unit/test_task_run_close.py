"""The end a reader records for a task whose run Temporal closed without writing it
(client/tasks.py `_run_closed`): a run from before `task-temporal-cancel-v1` that was
cancelled through Temporal, and one terminated there."""

from __future__ import annotations

from datetime import UTC, datetime

from support import event_schema_validator

from weft.client.run_close import RunClose
from weft.client.tasks import _run_closed, _running_attempt
from weft.contract.tasks import TaskAttempt, TaskRecord, attempt_end_event_id

AT = "2026-11-28T06:00:00.000Z"
TASK_ID = "task-0123456789ab"


def _running_task() -> TaskRecord:
    attempt = TaskAttempt(
        attempt_id=f"{TASK_ID}.a1", number=1, run_id="run-1", thread_id="t-1", started_at=AT
    )
    return TaskRecord(
        task_id=TASK_ID,
        objective="Do it.",
        assignee="helper",
        status="running",
        attempts=[attempt],
        created_at=AT,
        updated_at=AT,
    )


def _close(closed_as: str, reason: str) -> RunClose:
    closed_at = datetime(2026, 11, 28, 6, 5, tzinfo=UTC)
    return RunClose(run_id="run-1", closed_as=closed_as, reason=reason, closed_at=closed_at)  # type: ignore[arg-type]


def test_a_run_cancelled_through_temporal_ends_the_task_and_its_attempt_cancelled():
    record = _running_task()
    attempt = _running_attempt(record)
    assert attempt is not None
    ended, end = _run_closed(
        record, attempt, _close("cancelled", "its run was cancelled through Temporal")
    )
    validator = event_schema_validator()
    for event in (ended, end):
        validator.validate(event.to_wire())
    assert ended.type == "task.attempt.failed"
    assert ended.event_id == attempt_end_event_id(attempt.attempt_id)  # one end per attempt
    assert ended.payload["attempt"]["status"] == "cancelled"
    assert end.type == "task.cancelled" and end.event_id == f"{TASK_ID}:run-1:closed"
    assert end.payload == {
        "reason": "its run was cancelled through Temporal",
        "closedAs": "cancelled",
    }
    assert end.timestamp == "2026-11-28T06:05:00.000Z"


def test_a_terminated_run_fails_the_task_with_temporals_reason():
    record = _running_task()
    ended, end = _run_closed(
        record, _running_attempt(record), _close("terminated", "its run was terminated: x")
    )
    assert ended.payload["attempt"]["status"] == "failed"
    assert end.type == "task.failed" and end.payload["closedAs"] == "terminated"
