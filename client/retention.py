"""Retention: the TTLs in force, the `weft-retention` Temporal Schedule that runs the
`RetentionSweep`, and one sweep run now (docs/deletion.md, "Retention").

The schedule is a plain Temporal Schedule with the id `weft-retention` (its memo
`weftRetention` marks it as weft's) that starts a `RetentionSweep` on the worker's task
queue every `every`; a sweep due while the last one still runs is skipped. Enabling it
again updates its interval and unpauses it. Its recent runs are read back from Temporal:
each sweep's result counts the threads it deleted.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionExecutionStartWorkflow,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleIntervalSpec,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleSpec,
    ScheduleState,
    ScheduleUpdate,
    ScheduleUpdateInput,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.definitions import AgentDef
from weft.contract.retention import (
    RETENTION_SCHEDULE_ID,
    RETENTION_WORKFLOW_TYPE,
    RetentionSweepInput,
    RetentionSweepResult,
    format_ttl,
    parse_ttl,
)
from weft.contract.wire import CamelModel
from weft.store import Store

RETENTION_MEMO = "weftRetention"
DEFAULT_EVERY = "1h"
# How many of the schedule's recent sweeps `status` reads back.
STATUS_RUNS = 5
_CATCHUP_WINDOW = timedelta(minutes=10)


class RetentionRun(CamelModel):
    """One sweep the schedule started: how it went and, once completed, what it deleted."""

    workflow_id: str
    started_at: datetime
    status: str | None = None
    result: RetentionSweepResult | None = None
    error: str | None = None


class RetentionStatus(CamelModel):
    """The schedule's state, its recent sweeps, and the TTLs in force."""

    enabled: bool
    paused: bool = False
    every: str | None = None
    next_run: datetime | None = None
    last_run: datetime | None = None
    runs: list[RetentionRun] = Field(default_factory=list)
    tenants: dict[str, str] = Field(default_factory=dict, description="tenant: TTL as set")
    agents: dict[str, str] = Field(default_factory=dict, description="agent: TTL as defined")


class Retention:
    """Retention on one Temporal namespace and store. `client` must come from
    `weft.connect` (weft's data converter); `task_queue` is where sweeps run (the
    worker's)."""

    def __init__(
        self,
        client: Client,
        store: Store,
        *,
        task_queue: str,
        schedule_id: str = RETENTION_SCHEDULE_ID,
    ) -> None:
        self._client = client
        self._store = store
        self._task_queue = task_queue
        self._schedule_id = schedule_id

    # -- tenants' TTLs ----------------------------------------------------------------

    async def set_tenant(self, tenant: str, ttl: str) -> timedelta:
        """Keep `tenant`'s closed threads for `ttl` (`90d`); ValueError naming a bad one."""
        return await asyncio.to_thread(self._store.retention.set_tenant, tenant, ttl)

    async def clear_tenant(self, tenant: str) -> bool:
        """Drop `tenant`'s TTL; whether it had one."""
        return await asyncio.to_thread(self._store.retention.clear_tenant, tenant)

    # -- the schedule -----------------------------------------------------------------

    async def enable(self, every: str = DEFAULT_EVERY) -> bool:
        """Create the schedule (or update its interval and unpause it); whether it was
        created."""
        interval = parse_ttl(every, what="--every")
        schedule = Schedule(
            action=ScheduleActionStartWorkflow(
                RETENTION_WORKFLOW_TYPE,
                # Temporal appends each run's scheduled time to this id.
                id=f"{self._schedule_id}-sweep",
                task_queue=self._task_queue,
                static_summary="weft retention: delete closed threads past their TTL",
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=interval)]),
            policy=SchedulePolicy(
                overlap=ScheduleOverlapPolicy.SKIP, catchup_window=_CATCHUP_WINDOW
            ),
            state=ScheduleState(note="weft retention"),
        )
        try:
            await self._client.create_schedule(
                self._schedule_id, schedule, memo={RETENTION_MEMO: True}
            )
            return True
        except ScheduleAlreadyRunningError:
            pass

        def replaced(_: ScheduleUpdateInput) -> ScheduleUpdate:
            return ScheduleUpdate(schedule=schedule)

        await self._client.get_schedule_handle(self._schedule_id).update(replaced)
        return False

    async def disable(self) -> bool:
        """Delete the schedule (a sweep running goes on); whether there was one."""
        try:
            await self._client.get_schedule_handle(self._schedule_id).delete()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def status(self, agents: dict[str, AgentDef] | None = None) -> RetentionStatus:
        """The schedule's state and recent sweeps, each tenant's TTL, and each of `agents`'
        (the definitions in force) that sets one."""
        tenants = await asyncio.to_thread(self._store.retention.tenants)
        agent_ttls = {
            name: agent.retention.closed_threads_ttl
            for name, agent in sorted((agents or {}).items())
            if agent.retention is not None
        }
        try:
            described = await self._client.get_schedule_handle(self._schedule_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            return RetentionStatus(enabled=False, tenants=tenants, agents=agent_ttls)
        info, spec = described.info, described.schedule.spec
        every = format_ttl(spec.intervals[0].every) if spec.intervals else None
        recent = [
            (action.started_at, action.action)
            for action in info.recent_actions
            if isinstance(action.action, ScheduleActionExecutionStartWorkflow)
        ][-STATUS_RUNS:]
        runs = await asyncio.gather(*(self._run(at, started.workflow_id) for at, started in recent))
        return RetentionStatus(
            enabled=True,
            paused=described.schedule.state.paused,
            every=every,
            next_run=info.next_action_times[0] if info.next_action_times else None,
            last_run=recent[-1][0] if recent else None,
            runs=list(runs),
            tenants=tenants,
            agents=agent_ttls,
        )

    async def _run(self, started_at: datetime, workflow_id: str) -> RetentionRun:
        """A sweep's status and, once completed, its result (its last run's, after any
        continue-as-new)."""
        run = RetentionRun(workflow_id=workflow_id, started_at=started_at)
        handle = self._client.get_workflow_handle(workflow_id)
        try:
            described = await handle.describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:  # past the namespace's retention
                return run
            raise
        status = described.status or WorkflowExecutionStatus.RUNNING
        run.status = status.name.lower()
        if status == WorkflowExecutionStatus.COMPLETED:
            run.result = RetentionSweepResult.model_validate(await handle.result())
        elif status == WorkflowExecutionStatus.FAILED:
            try:
                await handle.result()
            except WorkflowFailureError as failure:
                run.error = str(failure.cause)
        return run

    # -- one sweep now ----------------------------------------------------------------

    async def run_now(self, *, now: datetime | None = None, **options: Any) -> RetentionSweepResult:
        """Run one sweep on the worker's task queue and wait for it; `now` is its clock
        (default: when it starts), `options` the rest of `RetentionSweepInput`."""
        sweep = RetentionSweepInput(now=now, **options)
        result = await self._client.execute_workflow(
            RETENTION_WORKFLOW_TYPE,
            sweep.model_dump(mode="json", by_alias=True, exclude_defaults=True),
            id=f"{self._schedule_id}-now-{uuid.uuid4().hex[:12]}",
            task_queue=self._task_queue,
            static_summary="weft retention run-now",
        )
        return RetentionSweepResult.model_validate(result)


__all__ = [
    "DEFAULT_EVERY",
    "RETENTION_MEMO",
    "Retention",
    "RetentionRun",
    "RetentionStatus",
]
