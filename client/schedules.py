"""Schedules: agents that wake up on their own, as Temporal Schedules (docs/schedules.md).

A weft schedule is a plain Temporal Schedule whose id is its name and whose memo
(`weftSchedule`) says what it does. A tenant's schedule is named in the tenant's own space,
`<tenant>:<name>` (`default`'s keep the bare name), so tenants never contend for a name;
acting for a tenant, the bare name means the tenant's (docs/tenants.md). Each firing
either starts `ScheduledDelivery`, which queues a message to a standing thread, or
`ScheduledThreadStart`, which starts a new `AgentThread` with a readable id. Temporal does
the timing, catch-up, overlap and pausing; nothing here runs on a timer.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import ValidationError
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleAlreadyRunningError,
    ScheduleDescription,
    ScheduleHandle,
    ScheduleOverlapPolicy,
    SchedulePolicy,
    ScheduleState,
    WorkflowExecutionStatus,
)
from temporalio.service import RPCError, RPCStatusCode

from weft.client.schedule_inputs import (
    DEFAULT_CATCHUP_WINDOW,
    OVERLAP_NAMES,
    ScheduleError,
    ScheduleExists,
    ScheduleNotFound,
    check_name,
    checked_catchup_window,
    overlap_or,
    parse_duration,
    schedule_spec,
    scheduled_message,
)
from weft.client.schedule_runs import ScheduleRun, ScheduleRuns
from weft.client.thread_status import closed_message
from weft.client.thread_tenant import thread_tenant
from weft.contract.messages import QueuedMessage
from weft.contract.scheduled_threads import (
    RUN_MEMO,
    SCHEDULED_THREAD_TYPE,
    ScheduledThreadInput,
)
from weft.contract.schedules import SCHEDULED_DELIVERY_TYPE, ScheduledDeliveryInput
from weft.contract.tenants import DEFAULT_TENANT, check_tenant
from weft.contract.thread import WORKFLOW_TYPE, ThreadStartInput
from weft.contract.wire import CamelModel
from weft.workflows.search_attributes import TENANT

# The schedule's memo key: what the schedule does.
SCHEDULE_MEMO = "weftSchedule"
# The overlap policies under which a run must stay open while its thread runs: the policy
# is about the previous thread, which only the run that started it can stand for.
_POLICIES_ABOUT_THE_THREAD = frozenset(ScheduleOverlapPolicy) - {ScheduleOverlapPolicy.ALLOW_ALL}


class ScheduleTarget(CamelModel):
    """What a weft schedule does, kept in its memo.

    The spec is kept as written: Temporal turns cron strings into calendar specs, which
    read worse than the line the user typed.
    """

    kind: Literal["thread", "agent"]
    thread_id: str | None = None
    agent: str | None = None
    message_preview: str
    spec: str
    # Absent on schedules made before tenants: `default`'s, as their threads were.
    tenant: str | None = None

    def summary(self) -> str:
        """One line: where each run goes (and whose, when not `default`'s)."""
        if self.kind == "thread":
            where = f"thread {self.thread_id}"
        else:
            where = f"agent {self.agent} (a new thread each run)"
        owner = self.tenant or DEFAULT_TENANT
        return where if owner == DEFAULT_TENANT else f"{where} for tenant {owner}"


class WeftSchedule(CamelModel):
    """A weft schedule: its target, timing, policies, state and recent runs."""

    name: str
    target: ScheduleTarget
    tenant: str
    spec: str
    overlap: str
    catchup_window_seconds: float | None
    pause_on_failure: bool
    paused: bool
    note: str | None
    next_runs: list[datetime]
    recent_runs: list[ScheduleRun]
    last_run: ScheduleRun | None
    runs: int
    skipped_overlap: int
    missed_catchup_window: int


class Schedules:
    """weft's schedules on one Temporal namespace.

    `task_queue` is where `--agent` schedules start their threads (the worker's queue);
    a `--thread` schedule delivers on the task queue its thread runs on. `client` must come
    from `weft.connect` (weft's data converter), like the workers'.

    With `tenant` (`weft --tenant T`), the schedules of that tenant only: another tenant's
    schedule, or one weft did not create, is `ScheduleNotFound` worded as a missing one
    (a caller acting for one tenant learns nothing of another's schedules); `list` lists
    the tenant's, and `create` makes the tenant's. Its schedules may be named bare (`x`
    for `T:x`).
    """

    def __init__(
        self, client: Client, *, task_queue: str = "agents", tenant: str | None = None
    ) -> None:
        self._client = client
        self._task_queue = task_queue
        self._runs = ScheduleRuns(client)
        self.tenant = check_tenant(tenant) if tenant is not None else None

    async def create(
        self,
        name: str,
        *,
        message: str,
        thread: str | None = None,
        agent: str | None = None,
        cron: str | None = None,
        every: timedelta | str | None = None,
        overlap: ScheduleOverlapPolicy | str | None = None,
        catchup_window: timedelta | str | None = None,
        time_zone: str | None = None,
        pause_on_failure: bool | None = None,
        note: str | None = None,
        tenant: str | None = None,
    ) -> ScheduleHandle:
        """Create schedule `name` (named `<tenant>:<name>` when a tenant other than
        `default` owns it: the handle's `id`): on `cron` or `every`, send `message` to
        `thread`, or start a new thread of `agent` with it as the first user message. Cron
        times are UTC unless `time_zone` (an IANA name, e.g. `Europe/Oslo`) is given.

        Defaults (docs/schedules.md): `--thread` schedules SKIP a firing while the previous
        delivery still runs and pause when a delivery fails (the thread is gone);
        `--agent` schedules ALLOW_ALL, because a thread never completes on its own and any
        other policy waits for the previous thread to close (each run stays open while its
        thread runs). Both catch up at most
        `DEFAULT_CATCHUP_WINDOW` of missed runs. Raises `ScheduleExists`, or
        `ScheduleError` naming the bad argument.

        The schedule is `tenant`'s (docs/tenants.md): an `--agent` schedule's threads are
        started as that tenant's (`default` when none is named); a `--thread` schedule is
        its thread's tenant's, and naming another tenant is refused.
        """
        check_name(name)
        tenant = self._own(tenant)
        if tenant is not None:
            try:
                check_tenant(tenant)
            except ValueError as err:
                raise ScheduleError(f"tenant: {err}") from None
        spec, spec_text = schedule_spec(cron, every, time_zone)
        window = checked_catchup_window(catchup_window)
        scheduled_message(name, message)  # a bad message is refused before any lookup
        preview = message[:200]
        if thread is not None and agent is None:
            # A schedule named for a tenant messages only that tenant's threads. Another
            # tenant's thread is "not found", as an unknown one: a caller acting for one
            # tenant (`weft --tenant`) learns nothing of another's threads.
            if tenant is not None and await thread_tenant(self._client, None, thread) != tenant:
                raise ScheduleError(f"thread {thread!r} not found")
            task_queue, owner = await self._running_thread(thread)
            default_overlap, default_pause = ScheduleOverlapPolicy.SKIP, True
        elif agent is not None and thread is None:
            task_queue, owner = self._task_queue, tenant or DEFAULT_TENANT
            default_overlap, default_pause = ScheduleOverlapPolicy.ALLOW_ALL, False
        else:
            raise ScheduleError("give exactly one target: a thread id or an agent name")
        schedule_id = await self._free_id(name, owner)
        content = scheduled_message(schedule_id, message)
        if thread is not None:
            action = _delivery(schedule_id, thread, content, task_queue)
            target = ScheduleTarget(
                kind="thread",
                thread_id=thread,
                message_preview=preview,
                spec=spec_text,
                tenant=owner,
            )
        else:
            assert agent is not None
            action = self._thread_start(
                schedule_id, agent, content, overlap_or(overlap, default_overlap), tenant
            )
            target = ScheduleTarget(
                kind="agent",
                agent=agent,
                message_preview=preview,
                spec=spec_text,
                tenant=owner,
            )
        policy = SchedulePolicy(
            overlap=overlap_or(overlap, default_overlap),
            catchup_window=window,
            pause_on_failure=default_pause if pause_on_failure is None else pause_on_failure,
        )
        schedule = Schedule(action=action, spec=spec, policy=policy, state=ScheduleState(note=note))
        try:
            return await self._client.create_schedule(
                schedule_id, schedule, memo={SCHEDULE_MEMO: target.model_dump(mode="json")}
            )
        except ScheduleAlreadyRunningError:
            raise _exists(schedule_id) from None
        except RPCError as err:
            if err.status == RPCStatusCode.INVALID_ARGUMENT:
                raise ScheduleError(
                    f"Temporal refused schedule {schedule_id!r} ({spec_text}): {err.message}"
                ) from None
            raise

    async def list(self, *, tenant: str | None = None) -> builtins.list[WeftSchedule]:
        """weft's schedules (others on the namespace are left out), by name; with
        `tenant`, that tenant's only (under a `Schedules` of one tenant: that one's)."""
        tenant = self._own(tenant)
        names = []
        async for entry in await self._client.list_schedules():
            target = _target(await entry.memo_value(SCHEDULE_MEMO, None))
            if target is not None and tenant in (None, _owner(target)):
                names.append(entry.id)
        # The listing is eventually consistent; describing each one is not, so a schedule
        # deleted a moment ago drops out here.
        found = await asyncio.gather(*(self._describe_if_any(name) for name in sorted(names)))
        return [schedule for schedule in found if schedule is not None]

    async def describe(self, name: str) -> WeftSchedule:
        """Schedule `name`, with the status (and error) of its last run."""
        description, target = await self._weft_description(name)
        return await self._view(description, target)

    async def pause(self, name: str, *, note: str | None = None) -> None:
        """Stop firing until `unpause`; `note` says why (shown by `list`)."""
        with _named(name):
            await (await self._handle(name)).pause(note=note or "paused with weft")

    async def unpause(self, name: str, *, note: str | None = None) -> None:
        """Fire again from the next scheduled time (missed ones are not caught up)."""
        with _named(name):
            await (await self._handle(name)).unpause(note=note or "unpaused with weft")

    async def trigger(self, name: str) -> None:
        """Fire once now, under the schedule's overlap policy, whether paused or not."""
        with _named(name):
            await (await self._handle(name)).trigger()

    async def delete(self, name: str) -> None:
        """Delete the schedule; the runs it started (threads, too) go on."""
        with _named(name):
            await (await self._handle(name)).delete()

    async def _handle(self, name: str) -> ScheduleHandle:
        description, _ = await self._weft_description(name)
        return self._client.get_schedule_handle(description.id)

    async def _weft_description(self, name: str) -> tuple[ScheduleDescription, ScheduleTarget]:
        description = None
        for schedule_id in schedule_ids(name, self.tenant):
            try:
                description = await self._client.get_schedule_handle(schedule_id).describe()
                break
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
        if description is None:
            raise _not_found(name)
        target = _target(await description.memo_value(SCHEDULE_MEMO, None))
        if self.tenant is not None and (target is None or _owner(target) != self.tenant):
            raise _not_found(name)
        if target is None:
            raise ScheduleError(
                f"schedule {name!r} was not created by weft (no {SCHEDULE_MEMO} memo);"
                " manage it with `temporal schedule`"
            )
        return description, target

    async def _free_id(self, name: str, owner: str) -> str:
        """The id for `owner`'s new schedule `name`; ScheduleExists when `owner` has one
        by that name already under its former, bare id (made before tenants had their own
        names), which the bare name would also reach."""
        schedule_id = tenant_schedule_id(owner, name)
        if schedule_id != name:
            try:
                earlier = await self._client.get_schedule_handle(name).describe()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
            else:
                target = _target(await earlier.memo_value(SCHEDULE_MEMO, None))
                if target is not None and _owner(target) == owner:
                    raise _exists(name)
        return schedule_id

    def _own(self, tenant: str | None) -> str | None:
        """The tenant a create or listing is for: `tenant`, or this `Schedules`' own one;
        naming another tenant than its own is refused."""
        if self.tenant is None or tenant in (None, self.tenant):
            return tenant or self.tenant
        raise ScheduleError(f"tenant {tenant!r}: these schedules are tenant {self.tenant!r}'s")

    async def _describe_if_any(self, name: str) -> WeftSchedule | None:
        try:
            return await self.describe(name)
        except ScheduleNotFound:
            return None

    def _thread_start(
        self,
        name: str,
        agent: str,
        message: QueuedMessage,
        overlap: ScheduleOverlapPolicy,
        tenant: str | None,
    ) -> ScheduleActionStartWorkflow:
        scheduled = ScheduledThreadInput(
            schedule=name,
            # The run starts the thread as `tenant`'s: `tenant` in its input (the store's
            # row) and `WeftTenant` on the child (workflows/scheduled_thread.py).
            start=ThreadStartInput(agent=agent, messages=[message], tenant=tenant),
            wait_for_close=overlap in _POLICIES_ABOUT_THE_THREAD,
        )
        return ScheduleActionStartWorkflow(
            SCHEDULED_THREAD_TYPE,
            scheduled,
            # Temporal appends each run's scheduled time; the run names the thread itself.
            id=f"{name}-start",
            task_queue=self._task_queue,
            memo={RUN_MEMO: name},
            static_summary=f"weft schedule {name}: starts a new {agent} thread",
        )

    async def _running_thread(self, thread_id: str) -> tuple[str, str]:
        """The queue thread `thread_id` runs on, and its tenant; it must be a running
        AgentThread."""
        try:
            described = await self._client.get_workflow_handle(thread_id).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                raise ScheduleError(f"thread {thread_id!r} not found") from None
            raise
        if described.workflow_type != WORKFLOW_TYPE:
            raise ScheduleError(
                f"workflow {thread_id!r} is a {described.workflow_type}, not an {WORKFLOW_TYPE}"
            )
        if described.status not in (None, WorkflowExecutionStatus.RUNNING):
            closed = closed_message(thread_id, described.status)
            raise ScheduleError(f"{closed}: it cannot receive messages")
        # Set at the thread's start and never changed; none is `default`'s.
        tenant = described.typed_search_attributes.get(TENANT) or DEFAULT_TENANT
        return described.task_queue, tenant

    async def _view(self, description: ScheduleDescription, target: ScheduleTarget) -> WeftSchedule:
        info, schedule = description.info, description.schedule
        recent = await self._runs.recent(description)
        last = None
        if recent:
            last = recent[-1] = await self._runs.with_outcome(recent[-1])
        window = schedule.policy.catchup_window
        return WeftSchedule(
            name=description.id,
            target=target,
            tenant=_owner(target),
            spec=target.spec,
            overlap=schedule.policy.overlap.name.lower(),
            catchup_window_seconds=window.total_seconds() if window is not None else None,
            pause_on_failure=schedule.policy.pause_on_failure,
            paused=schedule.state.paused,
            note=schedule.state.note,
            next_runs=list(info.next_action_times),
            recent_runs=recent,
            last_run=last,
            runs=info.num_actions,
            skipped_overlap=info.num_actions_skipped_overlap,
            missed_catchup_window=info.num_actions_missed_catchup_window,
        )


def tenant_schedule_id(tenant: str, name: str) -> str:
    """Schedule `name`'s id when `tenant` owns it: `<tenant>:<name>`, `default`'s bare.
    No schedule name holds a `:` (`check_name`), so no tenant's id meets another's."""
    return name if tenant == DEFAULT_TENANT else f"{tenant}:{name}"


def schedule_ids(name: str, tenant: str | None) -> list[str]:
    """The schedule ids `name` may stand for, in the order to look them up, for a caller
    acting for `tenant` (None: the operator, who names the id itself). Acting for T, a
    bare name is T's: `T:name`, or one of T's made before tenants had their own names (the
    bare id, whose memo must say T's)."""
    if tenant is None or tenant == DEFAULT_TENANT or ":" in name:
        return [name]
    return [tenant_schedule_id(tenant, name), name]


def _delivery(
    schedule_id: str, thread_id: str, message: QueuedMessage, task_queue: str
) -> ScheduleActionStartWorkflow:
    """The action that messages `thread_id`, running on `task_queue`."""
    delivery = ScheduledDeliveryInput(thread_id=thread_id, schedule=schedule_id, message=message)
    return ScheduleActionStartWorkflow(
        SCHEDULED_DELIVERY_TYPE,
        delivery,
        # Temporal appends each run's scheduled time to this id.
        id=f"{schedule_id}-delivery",
        task_queue=task_queue,
        memo={RUN_MEMO: schedule_id},
        static_summary=f"weft schedule {schedule_id}: a message to thread {thread_id}",
    )


def _target(memo: Any) -> ScheduleTarget | None:
    """The weft target in a schedule's memo value; None when it is not weft's."""
    if memo is None:
        return None
    try:
        return ScheduleTarget.model_validate(memo)
    except ValidationError:
        return None


def _owner(target: ScheduleTarget) -> str:
    """The tenant of a schedule (one made before tenants is `default`'s)."""
    return target.tenant or DEFAULT_TENANT


def _exists(name: str) -> ScheduleExists:
    return ScheduleExists(f"a schedule named {name!r} exists already")


def _not_found(name: str) -> ScheduleNotFound:
    """The refusal a missing schedule gets, and so another tenant's too."""
    return ScheduleNotFound(f"no schedule named {name!r}")


@contextmanager
def _named(name: str) -> Iterator[None]:
    """Temporal's NOT_FOUND for schedule `name` as `ScheduleNotFound`."""
    try:
        yield
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise _not_found(name) from None
        raise


__all__ = [
    "DEFAULT_CATCHUP_WINDOW",
    "OVERLAP_NAMES",
    "RUN_MEMO",
    "SCHEDULE_MEMO",
    "ScheduleError",
    "ScheduleExists",
    "ScheduleNotFound",
    "ScheduleRun",
    "ScheduleTarget",
    "Schedules",
    "WeftSchedule",
    "parse_duration",
    "schedule_ids",
    "tenant_schedule_id",
]
