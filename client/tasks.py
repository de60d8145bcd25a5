"""Tasks from Python (`weft.Tasks`): create, get, list, cancel, retry, append progress,
and the `task_snapshot` read model, over Temporal and the store (docs/tasks.md).

`create` checks the task (ids, the acceptance schema, no dependency cycle), writes its
`task.created` event and starts its `TaskRun` workflow; every later fact is the
workflow's. Reads come from the store's `tasks` rows, folded from the tasks' events.
"""

from __future__ import annotations

import builtins
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import jsonschema
from pydantic import ValidationError
from temporalio.client import Client, WorkflowHandle
from temporalio.exceptions import WorkflowAlreadyStartedError

from weft.contract.events import Event
from weft.contract.tasks import (
    SIGNAL_APPEND_PROGRESS,
    SIGNAL_CANCEL_TASK,
    TASK_WORKFLOW_TYPE,
    TERMINAL_STATUSES,
    UNSUCCESSFUL_STATUSES,
    CancelTask,
    TaskProgress,
    TaskRecord,
    TaskRunInput,
    TaskSnapshot,
    TaskSpec,
    check_task_id,
    find_cycle,
    task_snapshot,
)
from weft.contract.validation import describe_validation_error
from weft.store import Store


class TaskError(ValueError):
    """A task command was refused; the message names the task and what is wrong."""


class TaskNotFound(TaskError, LookupError):
    """No task has this id."""


def new_task_id() -> str:
    """A fresh `task-<12 hex>` id."""
    return f"task-{uuid.uuid4().hex[:12]}"


class Tasks:
    """Tasks of one task queue, with the store their facts are written to."""

    def __init__(self, client: Client, store: Store, *, task_queue: str = "agents") -> None:
        self._client = client
        self._store = store
        self._task_queue = task_queue

    async def create(
        self,
        objective: str,
        assignee: str,
        *,
        task_id: str | None = None,
        dependencies: Sequence[str] = (),
        acceptance_schema: dict[str, Any] | None = None,
        **fields: Any,
    ) -> TaskRecord:
        """Create a task and start it; `fields` are the other `TaskSpec` fields (`scope`,
        `constraints` as dicts or models). A dependency may name a task created later."""
        spec = _spec(
            {
                "objective": objective,
                "assignee": assignee,
                "dependencies": list(dependencies),
                "acceptance": {"schema": acceptance_schema},
                **fields,
            }
        )
        try:
            task_id = check_task_id(task_id) if task_id else new_task_id()
        except ValueError as err:
            raise TaskError(str(err)) from None
        if self._store.tasks.get(task_id) is not None:
            raise TaskError(f"task {task_id} exists already")
        self._refuse_cycle(task_id, spec.dependencies)
        at = now_iso()
        record = TaskRecord.model_validate(
            {**spec.model_dump(mode="json"), "taskId": task_id, "createdAt": at, "updatedAt": at}
        )
        self._store.tasks.record([_created(record)])
        try:
            await self._client.start_workflow(
                TASK_WORKFLOW_TYPE,
                TaskRunInput(task=record).model_dump(mode="json"),
                id=task_id,
                task_queue=self._task_queue,
                static_summary=f"task {task_id} · {assignee}",
            )
        except Exception as err:
            self._store.tasks.record([_failed_to_start(record, err)])
            raise TaskError(f"task {task_id} could not start: {err}") from err
        return self.get(task_id)

    def get(self, task_id: str) -> TaskRecord:
        """The task as the store has it; `TaskNotFound` naming the id."""
        record = self._store.tasks.get(task_id)
        if record is None:
            raise TaskNotFound(f"no task {task_id!r}")
        return record

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        session_id: str | None = None,
        limit: int = 100,
    ) -> builtins.list[TaskRecord]:
        """Tasks, most recently changed first."""
        return self._store.tasks.list(statuses=statuses, session_id=session_id, limit=limit)

    def snapshot(self, *, session_id: str | None = None, limit: int = 500) -> TaskSnapshot:
        """`task_snapshot`: active, waiting, failed and recent terminal tasks, the graph,
        the current attempts and delivery, from the store."""
        return task_snapshot(self.list(session_id=session_id, limit=limit))

    def events(self, task_id: str) -> builtins.list[Event]:
        """The task's log, oldest first."""
        self.get(task_id)
        return self._store.tasks.events(task_id)

    async def cancel(self, task_id: str, reason: str | None = None) -> None:
        """Ask the task to stop: it ends `cancelled`, closing its running attempt's thread."""
        self._unfinished(task_id, "cancel")
        await self._handle(task_id).signal(
            SIGNAL_CANCEL_TASK, CancelTask(reason=reason).model_dump(mode="json")
        )

    async def append_progress(
        self, task_id: str, message: str, data: dict[str, Any] | None = None
    ) -> None:
        """Add a progress entry to an unfinished task (`task.progress`)."""
        try:
            entry = TaskProgress(message=message, data=data)
        except ValidationError as err:
            raise TaskError(f"progress of {task_id}: {describe_validation_error(err)}") from None
        self._unfinished(task_id, "append progress to")
        await self._handle(task_id).signal(SIGNAL_APPEND_PROGRESS, entry.model_dump(mode="json"))

    async def retry(self, task_id: str, reason: str | None = None) -> TaskRecord:
        """Run a failed, timed out or cancelled task again: a new run of its workflow
        makes new attempts (up to `maxAttempts` more); the earlier ones stay."""
        record = self.get(task_id)
        if record.status not in UNSUCCESSFUL_STATUSES:
            raise TaskError(
                f"task {task_id} is {record.status}: only a failed, timed out or cancelled "
                "task can be retried"
            )
        start = TaskRunInput(task=record, retry_reason=reason or "retried")
        try:
            await self._client.start_workflow(
                TASK_WORKFLOW_TYPE,
                start.model_dump(mode="json"),
                id=task_id,
                task_queue=self._task_queue,
                static_summary=f"task {task_id} · {record.assignee} (retry)",
            )
        except WorkflowAlreadyStartedError:
            raise TaskError(
                f"task {task_id} is still finishing its last run; retry it again"
            ) from None
        return record

    async def wait(self, task_id: str) -> TaskRecord:
        """Wait for the task's current run to end; the task as it then is."""
        self.get(task_id)
        await self._handle(task_id).result()
        return self.get(task_id)

    def _handle(self, task_id: str) -> WorkflowHandle[Any, Any]:
        return self._client.get_workflow_handle(task_id)

    def _unfinished(self, task_id: str, verb: str) -> TaskRecord:
        record = self.get(task_id)
        if record.status in TERMINAL_STATUSES:
            raise TaskError(f"cannot {verb} task {task_id}: it is {record.status}")
        return record

    def _refuse_cycle(self, task_id: str, dependencies: builtins.list[str]) -> None:
        graph = {**self._store.tasks.graph(), task_id: dependencies}
        cycle = find_cycle(task_id, graph)
        if cycle is not None:
            raise TaskError(f"dependency cycle: {' → '.join(cycle)}")


def now_iso() -> str:
    """Current UTC time as ISO-8601 with milliseconds and a Z suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _spec(fields: dict[str, Any]) -> TaskSpec:
    """The checked spec; TaskError naming the field or the schema's problem."""
    try:
        spec = TaskSpec.model_validate(fields)
    except ValidationError as err:
        raise TaskError(f"invalid task: {describe_validation_error(err)}") from None
    schema = spec.acceptance.schema_
    if schema is not None:
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as err:
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            raise TaskError(f"acceptance.schema at {where}: {err.message}") from None
    return spec


def _created(record: TaskRecord) -> Event:
    return _event(record, "task.created", {"task": record.model_dump(mode="json")}, "accepted")


def _failed_to_start(record: TaskRecord, err: Exception) -> Event:
    return _event(record, "task.failed", {"reason": f"could not start: {err}"}, "failed")


def _event(record: TaskRecord, kind: str, payload: dict[str, Any], status: str) -> Event:
    """An event of the task's log written by the client (creation, or a failed start)."""
    return Event.model_validate(
        {
            "type": kind,
            "eventId": f"{record.task_id}:{kind}:{uuid.uuid4().hex[:8]}",
            "timestamp": now_iso(),
            "threadId": record.task_id,  # the task's own log
            "sessionId": record.scope.session_id,
            "status": status,
            "payload": payload,
            "taskId": record.task_id,
        }
    )
