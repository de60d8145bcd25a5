"""A task's dependencies: waiting for them to complete, and telling dependents it ended.

A dependency's end is signalled (`dependency_settled`); the store is read again now and
then in case a signal was lost. A failed, timed out or cancelled dependency blocks the
task (`task.blocked`) until it is retried and completes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow

from weft.contract.tasks import (
    ACTIVITY_TASK_DEPENDENCIES,
    ACTIVITY_TASK_DEPENDENTS,
    SIGNAL_DEPENDENCY_SETTLED,
    UNSUCCESSFUL_STATUSES,
    DependencyQuery,
    DependencyStates,
    TaskCommand,
)
from weft.workflows.tasks.task_log import LOCAL_TIMEOUT, TaskLog
from weft.workflows.tasks.task_views import RunFacts

# The store is read again this often in case a signal was lost (its sender's run ended
# before it could send). Each check adds a timer and a local activity to history (about
# 170 events a day of waiting), so it is rare; a long wait continues as new from here.
_DEPENDENCY_RECHECK = timedelta(hours=1)


class WaitControls(Protocol):
    """What the wait reads of the commands: who started a held task, the pause, and the
    wakes (a resume, an edge changed) that make it look again."""

    @property
    def start(self) -> TaskCommand | None: ...

    @property
    def paused_from(self) -> str | None: ...

    @property
    def wakes(self) -> int: ...

    async def gate(self) -> None: ...


class DependencyWait:
    """Owns the dependency signals received and the dependencies last seen completed."""

    def __init__(self, run: RunFacts, controls: WaitControls) -> None:
        self._run = run
        self._controls = controls
        self._settled = 0
        self.completed: set[str] = set()  # dependencies last seen completed

    def on_settled(self) -> None:
        self._settled += 1

    async def wait(self, log: TaskLog, *, announce: bool = True) -> None:
        """Until every dependency has completed (`task.queued` first, when `announce`)."""
        controls = self._controls
        if announce:
            queued: dict[str, Any] = {"waitingOn": log.record.dependencies}
            if controls.start is not None:
                queued |= {"startedBy": controls.start.by or "operator"}
                queued |= {"reason": controls.start.reason} if controls.start.reason else {}
            await log.emit("task.queued", queued)
        while dependencies := log.record.dependencies:
            if self._run.commands:
                await controls.gate()
            seen = self._settled + controls.wakes
            states = await workflow.execute_local_activity(
                ACTIVITY_TASK_DEPENDENCIES,
                DependencyQuery(task_id=log.record.task_id, dependencies=dependencies),
                result_type=DependencyStates,
                start_to_close_timeout=LOCAL_TIMEOUT,
            )
            open_ = [d for d in dependencies if states.statuses.get(d) != "completed"]
            self.completed = {d for d in dependencies if d not in open_}
            if not open_:
                return
            failed = [d for d in open_ if states.statuses.get(d) in UNSUCCESSFUL_STATUSES]
            if controls.paused_from is not None:
                pass  # paused: the status stays `paused`; looked at again on resume
            elif failed and failed != log.record.blocked_by:
                reason = ", ".join(f"{d} {states.statuses[d]}" for d in failed)
                await log.emit(
                    "task.blocked", {"blockedBy": failed, "reason": f"dependency {reason}"}
                )
            elif not failed and log.record.status == "blocked":
                await log.emit("task.queued", {"waitingOn": open_})
            try:
                await self._run.rest(self._settled_since(seen), timeout=_DEPENDENCY_RECHECK)
            except TimeoutError:
                pass

    async def tell_dependents(self, log: TaskLog) -> None:
        """Signal the unfinished tasks that depend on this one that it has ended."""
        dependents = await workflow.execute_local_activity(
            ACTIVITY_TASK_DEPENDENTS,
            log.record.task_id,
            result_type=list[str],
            start_to_close_timeout=LOCAL_TIMEOUT,
        )
        for task_id in dependents:
            try:
                await workflow.get_external_workflow_handle(task_id).signal(
                    SIGNAL_DEPENDENCY_SETTLED, {"taskId": log.record.task_id}
                )
            except Exception as err:  # its run may have ended; it reads the store when retried
                workflow.logger.info("dependent %s not signalled: %s", task_id, err)

    def _settled_since(self, seen: int) -> Callable[[], bool]:
        """Whether a dependency has signalled its end (or the task was resumed, or its
        edges changed) since `seen`."""
        return lambda: self._settled + self._controls.wakes != seen
