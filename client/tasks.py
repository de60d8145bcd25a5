"""Tasks from Python (`weft.Tasks`): create, get, list, start, update, delegate, link,
unlink, pause, resume, complete, fail, cancel, retry, append progress, and the
`task_snapshot` read model, over Temporal and the store (docs/tasks.md).

The commands themselves are `activities/task_commands.py`, which the agents' task tools
run too; this is their public face.
"""

from __future__ import annotations

from weft.activities.task_commands import TaskCommands, new_task_id, now_iso
from weft.contract.tasks import TaskError, TaskNotFound


class Tasks(TaskCommands):
    """Tasks of one task queue, with the store their facts are written to:
    `weft.Tasks(client, store, task_queue="agents")`."""


__all__ = ["TaskError", "TaskNotFound", "Tasks", "new_task_id", "now_iso"]
