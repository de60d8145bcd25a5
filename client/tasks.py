"""Tasks from Python (`weft.Tasks`): create, get, list, start, update, delegate, link,
unlink, pause, resume, complete, fail, cancel, retry, append progress, delete, and the
`task_snapshot` read model, over Temporal and the store (docs/tasks.md).

The commands themselves are `activities/task_commands.py`, which the agents' task tools
run too; this is their public face. Deleting is `activities/task_deletion.py`
(docs/deletion.md), which the CLI and the HTTP API run too.

One fact is written here: a task's `TaskRun` closed through Temporal (terminated,
cancelled there, timed out) writes no end of its own, so the readers that ask Temporal
(`show`, `list_checked`, `wait`, `retry`, a command that finds the run gone) record the end
it states, once, and close the attempt thread the closed run left running
(docs/tasks.md).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from temporalio.service import RPCError

from weft.activities.task_commands import TaskCommands, new_task_id, now_iso
from weft.activities.task_deletion import delete_task
from weft.activities.thread_deletion import DEFAULT_GRACE_SECONDS, DeletionReport
from weft.client.audit_trail import PYTHON_SUBJECT
from weft.client.run_close import (
    RunClose,
    record_each_close,
    record_listed_closes,
    unwritten_close,
)
from weft.contract.events import Event
from weft.contract.tasks import (
    STATUS_OF_EVENT,
    TaskAttempt,
    TaskError,
    TaskNotFound,
    TaskRecord,
    attempt_end_event_id,
)
from weft.contract.thread import SIGNAL_TERMINATE

_log = logging.getLogger(__name__)


class Tasks(TaskCommands):
    """Tasks of one task queue, with the store their facts are written to:
    `weft.Tasks(client, store, task_queue="agents")`."""

    async def delete(
        self,
        task_id: str,
        *,
        force: bool = False,
        with_threads: bool = False,
        grace: float = DEFAULT_GRACE_SECONDS,
        audit_as: str | None = PYTHON_SUBJECT,
    ) -> DeletionReport:
        """Delete the task so nothing of it is left: cancelled first if open (waited for up
        to `grace` seconds, then terminated), then its row, log and Temporal runs; with
        `with_threads`, the threads its attempts ran too. A task others depend on needs
        `force` (their edges to it are removed, recorded in their logs); a job's item's
        task goes with its job. `TaskNotFound` when nothing of it is left. The audit log
        records it as done by `audit_as` (None: not recorded; the HTTP API records its
        requests itself)."""
        return await delete_task(
            self._client,
            self._store,
            task_id,
            force=force,
            with_threads=with_threads,
            grace=grace,
            audit_subject=audit_as,
        )

    async def _record_unwritten_end(self, record: TaskRecord) -> bool:
        """Record the end of open task `record` when Temporal says its latest run closed
        without writing it (one describe, and the close event when it closed); True when
        this call stored it. The attempt's own thread the closed run left running is then
        closed, as the run would have closed it."""
        close = await unwritten_close(self._client, record.task_id)
        if close is None:
            return False
        attempt = _running_attempt(record)
        end = _run_closed(record, attempt, close)
        stored = await asyncio.to_thread(self._store.tasks.record_end, record.task_id, end)
        if stored and attempt is not None and not _given_thread(record, attempt):
            await self._close_thread(attempt.thread_id, f"its task ended: {close.reason}")
        return stored

    async def record_closed_runs(self, open_tasks: Sequence[TaskRecord]) -> bool:
        """Record the end of each of `open_tasks` whose latest run Temporal says was closed
        without writing it (one describe each, a few at once); True when any was stored."""
        return await record_each_close(open_tasks, self._record_unwritten_end)

    async def _record_listed_ends(self, open_tasks: list[TaskRecord]) -> bool:
        return await record_listed_closes(
            self._client, open_tasks, lambda r: r.task_id, self._record_unwritten_end
        )

    async def _close_thread(self, thread_id: str, reason: str) -> None:
        """The soft terminate the task's run would have sent the attempt's thread (it
        records the thread's end); a thread that has ended already needs none."""
        try:
            await self._client.get_workflow_handle(thread_id).signal(
                SIGNAL_TERMINATE, {"reason": reason}
            )
        except RPCError as err:
            _log.info("attempt thread %s not closed: %s", thread_id, err.message)


def _running_attempt(record: TaskRecord) -> TaskAttempt | None:
    attempt = record.current_attempt()
    return attempt if attempt is not None and attempt.status == "running" else None


def _given_thread(record: TaskRecord, attempt: TaskAttempt) -> bool:
    """Whether the attempt ran as a turn of the task's given thread (`runIn`), which the
    task never closes."""
    return record.run_in is not None and attempt.thread_id == record.run_in.thread_id


def _run_closed(record: TaskRecord, attempt: TaskAttempt | None, close: RunClose) -> list[Event]:
    """The task's end as Temporal states it, in the task's log as its run would have
    written it: the running attempt's end under the one id an attempt's end has (so the
    attempt's own late end is not stored beside it), then `task.cancelled` for a run
    cancelled through Temporal, `task.failed` with Temporal's reason otherwise, under an
    id of the closed run (written once)."""
    cancelled = close.closed_as == "cancelled"
    kind = "task.cancelled" if cancelled else "task.failed"
    at = close.closed_at.astimezone(UTC).isoformat(timespec="milliseconds")
    at = at.replace("+00:00", "Z")
    common: dict[str, Any] = {
        "timestamp": at,
        "threadId": record.task_id,  # the task's own log
        "sessionId": record.scope.session_id,
        "runId": close.run_id,
        "taskId": record.task_id,
        **({"parentTaskId": record.scope.parent_task_id} if record.scope.parent_task_id else {}),
    }
    events = []
    if attempt is not None:
        ended = {
            "attemptId": attempt.attempt_id,
            "status": "cancelled" if cancelled else "failed",
            "endedAt": at,
            "error": close.reason,
        }
        events.append(
            {
                **common,
                "type": "task.attempt.failed",
                "eventId": attempt_end_event_id(attempt.attempt_id),
                "attemptId": attempt.attempt_id,
                "status": record.status,  # the task's, until its end below
                "payload": {"attempt": ended},
            }
        )
    events.append(
        {
            **common,
            "type": kind,
            "eventId": f"{record.task_id}:{close.run_id}:closed",
            "status": STATUS_OF_EVENT[kind],
            "payload": {"reason": close.reason, "closedAs": close.closed_as},
        }
    )
    return [Event.model_validate(e) for e in events]


__all__ = ["TaskError", "TaskNotFound", "Tasks", "new_task_id", "now_iso"]
