"""`task.record`, `task.dependencies` and `task.dependents`: the `TaskRun` workflow's own
facts written to the task's log, and what it reads of other tasks (local activities)."""

from __future__ import annotations

import asyncio

from temporalio import activity

from weft.contract.events import Event
from weft.contract.tasks import (
    ACTIVITY_TASK_DEPENDENCIES,
    ACTIVITY_TASK_DEPENDENTS,
    ACTIVITY_TASK_RECORD,
    DependencyQuery,
    DependencyStates,
    TaskEventsInput,
)
from weft.store import Store


class TaskRecordActivities:
    """Writes task events with their row; reads dependency states."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name=ACTIVITY_TASK_RECORD)
    async def record(self, batch: TaskEventsInput) -> None:
        """Store the workflow's task events (idempotent by event id) and fold the row."""
        events = [Event.model_validate(e) for e in batch.events]
        await asyncio.to_thread(self._store.tasks.record, events)

    @activity.defn(name=ACTIVITY_TASK_DEPENDENCIES)
    async def dependencies(self, query: DependencyQuery) -> DependencyStates:
        """The status of each dependency that exists."""
        statuses = await asyncio.to_thread(self._store.tasks.statuses, query.dependencies)
        return DependencyStates(statuses=statuses)

    @activity.defn(name=ACTIVITY_TASK_DEPENDENTS)
    async def dependents(self, task_id: str) -> list[str]:
        """The unfinished tasks waiting on `task_id`."""
        return await asyncio.to_thread(self._store.tasks.dependents, task_id)
