"""The task's log as the `TaskRun` workflow writes it: each fact an event, folded into the
workflow's `TaskRecord` by the same fold as the store's row, and written by `task.record`."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow

from weft.contract.events import Event
from weft.contract.tasks import (
    ACTIVITY_TASK_RECORD,
    TaskEventsInput,
    TaskRecord,
    apply_event,
)

# Every local activity of the run (`task.record`, `task.link`, `task.lose`, the dependency
# reads) is given this long.
LOCAL_TIMEOUT = timedelta(seconds=30)


def now_iso() -> str:
    """ISO-8601 UTC workflow time, as events carry it."""
    return workflow.now().isoformat().replace("+00:00", "Z")


class TaskLog:
    """The workflow's view of its task: what its events have said so far."""

    def __init__(self, record: TaskRecord, *, ordered: bool = False) -> None:
        self.record = record
        # With commands arriving while the task runs (pause, resume, link, …), two writes
        # can be in flight at once: one at a time, so the store folds them in the order
        # the workflow did. Runs from before the commands existed keep their order.
        self._ordered = asyncio.Lock() if ordered else None

    def event(
        self, kind: str, payload: dict[str, Any], *, attempt_id: str | None = None
    ) -> dict[str, Any]:
        """A `task.*` event of this task, as wire JSON (ids replay-safe)."""
        task = self.record
        return Event.model_validate(
            {
                "type": kind,
                "eventId": f"{task.task_id}:{workflow.uuid4().hex}",
                "timestamp": now_iso(),
                "threadId": task.task_id,  # the log key: a task's events are its own log
                "sessionId": task.scope.session_id,
                "runId": workflow.info().run_id,
                "attemptId": attempt_id,
                "payload": payload,
                "taskId": task.task_id,
                **(
                    {"parentTaskId": task.scope.parent_task_id} if task.scope.parent_task_id else {}
                ),
            }
        ).to_wire()

    def fold(self, event: dict[str, Any]) -> dict[str, Any]:
        """Apply `event` to the record; the event with the status it leaves."""
        folded = apply_event(self.record, event)
        if folded is not None:
            self.record = folded
        return {**event, "status": self.record.status}

    def stated(self, *events: dict[str, Any]) -> list[dict[str, Any]]:
        """`events` with the status each would leave, without folding them yet."""
        record: TaskRecord | None = self.record
        out = []
        for event in events:
            record = apply_event(record, event) or record
            out.append({**event, "status": record.status if record else None})
        return out

    async def write(self, *events: dict[str, Any]) -> None:
        """Fold `events` and store them in one commit (`task.record`, a local activity)."""
        async with self.turn():
            await self.write_in_turn(*events)

    async def write_in_turn(self, *events: dict[str, Any]) -> None:
        """`write`, by a writer whose turn it is already (inside `turn()`)."""
        stated = [self.fold(e) for e in events]
        await workflow.execute_local_activity(
            ACTIVITY_TASK_RECORD,
            TaskEventsInput(events=stated),
            start_to_close_timeout=LOCAL_TIMEOUT,
            summary=", ".join(e["type"] for e in stated),
        )

    def turn(self) -> _Turn:
        """This writer's turn to fold and store (every writer, when the run is ordered):
        `async with log.turn(): ...`."""
        return _Turn(self._ordered)

    async def emit(
        self, kind: str, payload: dict[str, Any], *, attempt_id: str | None = None
    ) -> None:
        """Write one event of `kind`."""
        await self.write(self.event(kind, payload, attempt_id=attempt_id))


class _Turn:
    """Holds the log's write lock, if it has one, for the `async with` body."""

    def __init__(self, lock: asyncio.Lock | None) -> None:
        self._lock = lock

    async def __aenter__(self) -> None:
        if self._lock is not None:
            await self._lock.acquire()

    async def __aexit__(self, *_exc: object) -> None:
        if self._lock is not None:
            self._lock.release()
