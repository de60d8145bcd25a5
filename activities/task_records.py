"""`task.record`, `task.link`, `task.lose`, `task.dependencies` and `task.dependents`: the
`TaskRun` workflow's own facts written to the task's log (an edge change checked against
the graph in its own commit; a lost attempt unless its end was stored), and what it reads
of other tasks (local activities)."""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.service import RPCError

from weft.contract.events import Event
from weft.contract.tasks import (
    ACTIVITY_TASK_DEPENDENCIES,
    ACTIVITY_TASK_DEPENDENTS,
    ACTIVITY_TASK_LINK,
    ACTIVITY_TASK_LOSE,
    ACTIVITY_TASK_RECORD,
    DependencyQuery,
    DependencyStates,
    LinkResult,
    LoseAttempt,
    LostResult,
    TaskError,
    TaskEventsInput,
)
from weft.store import Store


async def _started_by(started_event_id: int | None) -> str | None:
    """The identity of the worker that started the lost activity, as the calling run's
    history records it (`ActivityTaskStarted`); None when it cannot be read."""
    if not started_event_id:
        return None
    info = activity.info()
    handle = activity.client().get_workflow_handle(
        info.workflow_id or "", run_id=info.workflow_run_id
    )
    try:
        async for event in handle.fetch_history_events():
            if event.event_id == started_event_id:
                return event.activity_task_started_event_attributes.identity or None
    except RPCError as err:
        activity.logger.warning("could not read who ran the lost attempt: %s", err)
    return None


class TaskRecordActivities:
    """Writes task events with their row; reads dependency states."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name=ACTIVITY_TASK_RECORD)
    async def record(self, batch: TaskEventsInput) -> None:
        """Store the workflow's task events (idempotent by event id) and fold the row."""
        events = [Event.model_validate(e) for e in batch.events]
        await asyncio.to_thread(self._store.tasks.record, events)

    @activity.defn(name=ACTIVITY_TASK_LINK)
    async def link(self, batch: TaskEventsInput) -> LinkResult:
        """Store a dependency edge change unless the graph refuses it (a cycle, an edge
        already there or not there): the refusal is the answer, not a failure to retry."""
        [event] = [Event.model_validate(e) for e in batch.events]
        try:
            stored = await asyncio.to_thread(self._store.tasks.link, event)
        except TaskError as refused:
            return LinkResult(refused=str(refused), field=refused.field)
        return LinkResult(event=stored.to_wire() if stored else event.to_wire())

    @activity.defn(name=ACTIVITY_TASK_LOSE)
    async def lose(self, lose: LoseAttempt) -> LostResult:
        """Record an attempt lost (its end, `task.lost`, naming the worker that ran it)
        unless its end is stored already."""
        end, lost = lose.events
        identity = await _started_by(lose.started_event_id)
        why = f"worker {identity or '(unknown)'} sent no heartbeat for {lose.silent_seconds:g} s"
        end = {
            **end,
            "payload": {"attempt": {**end["payload"]["attempt"], "error": f"lost: {why}"}},
        }
        lost = {
            **lost,
            "payload": {"reason": why},
            "worker": {"identity": identity} if identity else {},
        }
        stored = await asyncio.to_thread(
            self._store.tasks.lose, Event.model_validate(end), Event.model_validate(lost)
        )
        if stored is not None:
            return LostResult(stored_end=stored.to_wire())
        return LostResult(recorded=[end, lost])

    @activity.defn(name=ACTIVITY_TASK_DEPENDENCIES)
    async def dependencies(self, query: DependencyQuery) -> DependencyStates:
        """The status of each dependency that exists."""
        statuses = await asyncio.to_thread(self._store.tasks.statuses, query.dependencies)
        return DependencyStates(statuses=statuses)

    @activity.defn(name=ACTIVITY_TASK_DEPENDENTS)
    async def dependents(self, task_id: str) -> list[str]:
        """The unfinished tasks waiting on `task_id`."""
        return await asyncio.to_thread(self._store.tasks.dependents, task_id)
