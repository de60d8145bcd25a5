"""Tasks from Python (`weft.Tasks`): create, get, list, start, update, delegate, link,
unlink, pause, resume, complete, fail, cancel, retry, append progress, delete, and the
`task_snapshot` read model, over Temporal and the store (docs/tasks.md).

The commands themselves are `activities/task_commands.py`, which the agents' task tools
run too; this is their public face. Deleting is `activities/task_deletion.py`
(docs/deletion.md), which the CLI and the HTTP API run too.
"""

from __future__ import annotations

from weft.activities.task_commands import TaskCommands, new_task_id, now_iso
from weft.activities.task_deletion import delete_task
from weft.activities.thread_deletion import DEFAULT_GRACE_SECONDS, DeletionReport
from weft.client.audit_trail import PYTHON_SUBJECT
from weft.contract.tasks import TaskError, TaskNotFound


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


__all__ = ["TaskError", "TaskNotFound", "Tasks", "new_task_id", "now_iso"]
