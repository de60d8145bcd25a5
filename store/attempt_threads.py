"""The threads a thread's tasks ran their attempts in, as that thread's subagents.

A task a thread creates with the task tools (its `scope.threadId`, the indexed
`created_by_thread` column) runs each attempt in an `AgentThread` of its own, started by
the task's run, not by the thread. The task's record states every link: who created it,
to whom it was delegated (`delegatedTo`), and each attempt's thread (`attempts[].threadId`,
from `task.attempt.started`). So the attempt threads are listed under the creating thread
read-side, as registry-shaped entries (`tool: "tasks"`, with `taskId` and `attemptId`),
without a `subagent.*` event in its log: no workflow of it started them. A task run in a
given thread (`runIn`) has no thread of its own to list.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from weft.contract.tasks import TaskAttempt, TaskRecord
from weft.store.threads import CLOSED_STATUSES

if TYPE_CHECKING:
    from weft.store import Store

# The tool group whose `create_task` / `delegate_task` made the task.
ATTEMPT_TOOL = "tasks"

# An attempt's end as the registry's status of a child (`contract.subagents.SubagentStatus`).
_STATUS_OF_ATTEMPT = {
    "running": "running",
    "completed": "completed",
    "failed": "failed",
    "lost": "failed",
    "timed_out": "failed",
    "cancelled": "terminated",
}


def attempt_subagents(store: Store, parent_thread_id: str) -> list[dict[str, Any]]:
    """The attempt threads of the tasks `parent_thread_id` created, oldest task first and
    each task's attempts in order, as registry entries of that thread."""
    records = [
        TaskRecord.model_validate(data)
        for data in store.subagents.tasks_created_by([parent_thread_id])
    ]

    def closed(thread_id: str) -> bool:
        row = store.threads.get(thread_id)
        return row is not None and row.status in CLOSED_STATUSES

    return [entry for record in records for entry in attempt_entries(record, closed)]


def attempt_entries(record: TaskRecord, closed: Callable[[str], bool]) -> list[dict[str, Any]]:
    """The task's attempt threads as registry entries of the thread that created it (none
    for a task run in a given thread); `closed` tells whether a thread stored its close
    (the task closes an attempt's thread when the attempt ends)."""
    return [
        _entry(record, attempt, closed(attempt.thread_id))
        for attempt in record.attempts
        if record.run_in is None or attempt.thread_id != record.run_in.thread_id
    ]


def _entry(record: TaskRecord, attempt: TaskAttempt, closed: bool) -> dict[str, Any]:
    delegated = f", delegated to {record.delegated_to}" if record.delegated_to else ""
    output = attempt.output.response if attempt.output else None
    return {
        "reference": attempt.thread_id,
        "name": f"{record.task_id} attempt {attempt.number}",
        "description": record.objective[:200],
        "resumable": False,
        "blocking": False,
        "status": _STATUS_OF_ATTEMPT.get(attempt.status, "running"),
        "parentCommunication": "explicit",
        "createdAt": attempt.started_at,
        "agent": record.assignee,  # the agent its attempts run as (a delegation's `to`)
        "tool": ATTEMPT_TOOL,
        "statusNote": f"attempt {attempt.number} of task {record.task_id}{delegated}: "
        f"{attempt.status}",
        "lastResult": (output or "")[:2000] if output is not None else attempt.error,
        "closed": closed,
        "updatedAt": attempt.ended_at,
        "taskId": record.task_id,
        "attemptId": attempt.attempt_id,
    }


__all__ = ["ATTEMPT_TOOL", "attempt_entries", "attempt_subagents"]
