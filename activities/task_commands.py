"""The task commands (docs/tasks.md), over Temporal and the store: what `weft.Tasks`, the
CLI, the HTTP routes and the agents' task tools all run.

`create` checks the task (ids, the acceptance schema) and stores its `task.created` with
the cycle check in one transaction, then starts its `TaskRun` workflow; every later fact is
the workflow's. The commands a running task decides (start, update, delegate, link,
unlink, pause, resume, complete, fail) are updates of its workflow, refused there, before
history, when its state forbids them; `cancel` and progress are signals. Reads come from
the store's `tasks` rows, folded from the tasks' events. A refusal is a `TaskError` whose
`field` names the input refused (None: the task's state refused it). The async commands
read and write the store off the event loop (`asyncio.to_thread`); the sync reads (`get`,
`list`, …) are for callers without one.

A run closed through Temporal (terminated, cancelled there, timed out) writes no end, so
the store would say the task runs for ever. `show`, `list_checked`, `wait`, `retry`, and a
command whose run turns out to have closed, record the end Temporal states once
(`_record_unwritten_end`); the commands here trust the store, and `weft.Tasks`
(client/tasks.py, which asks Temporal: activities do not import the client) records it.
"""

from __future__ import annotations

import asyncio
import builtins
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn, TypeVar

import jsonschema
from pydantic import BaseModel, ValidationError
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.events import Event
from weft.contract.tasks import (
    SIGNAL_APPEND_PROGRESS,
    SIGNAL_CANCEL_TASK,
    TASK_REFUSED,
    TASK_WORKFLOW_TYPE,
    TERMINAL_STATUSES,
    UNSUCCESSFUL_STATUSES,
    UPDATE_COMPLETE_TASK,
    UPDATE_DELEGATE_TASK,
    UPDATE_FAIL_TASK,
    UPDATE_LINK_TASKS,
    UPDATE_PAUSE_TASK,
    UPDATE_RESUME_TASK,
    UPDATE_START_TASK,
    UPDATE_UNLINK_TASKS,
    UPDATE_UPDATE_TASK,
    CancelTask,
    CompleteTask,
    DelegateTask,
    LinkTasks,
    TaskAcceptance,
    TaskChanges,
    TaskCommand,
    TaskConstraints,
    TaskError,
    TaskNotFound,
    TaskProgress,
    TaskRecord,
    TaskRunInput,
    TaskScope,
    TaskSnapshot,
    TaskSpec,
    check_task_id,
    task_snapshot,
)
from weft.contract.tenants import DEFAULT_TENANT, check_tenant
from weft.contract.thread import WORKFLOW_TYPE as THREAD_WORKFLOW_TYPE
from weft.contract.validation import describe_validation_error
from weft.store import Store

_M = TypeVar("_M", bound=BaseModel)


# How long a retry waits for the run that wrote the task's end to close.
LAST_RUN_WAIT_SECONDS = 10.0


async def run_closed(handle: WorkflowHandle[Any, Any], seconds: float) -> bool:
    """Wait, up to `seconds`, for the workflow's current run (and any it continues as) to
    close, however it closes; False when it still runs. A task's retry and a job's resume
    start a new run of the same id only once the last one has closed."""
    try:
        await asyncio.wait_for(handle.result(), seconds)
    except TimeoutError:
        return False
    except (WorkflowFailureError, RPCError):
        pass  # it closed failed, terminated or timed out, or has no run: none is left
    return True


def new_task_id() -> str:
    """A fresh `task-<12 hex>` id."""
    return f"task-{uuid.uuid4().hex[:12]}"


class TaskCommands:
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
        tenant: str | None = None,
        in_thread: str | None = None,
        **fields: Any,
    ) -> TaskRecord:
        """Create a task and start it (unless `auto_start=False`: then it waits for
        `start`); `fields` are the other `TaskSpec` fields (`scope`, `constraints` as dicts
        or models). A dependency may name a task created later.

        `tenant` (docs/tenants.md) is the task's and its attempt threads'; none given, a
        task scoped to a thread (or run in one, `run_in`) is that thread's tenant's, any
        other `default`'s.

        `in_thread` (on the wire `runIn: {"threadId": …}`): each attempt is a new turn of
        that thread, which must be a running `AgentThread` of the task's tenant (another
        tenant's is refused as unknown) whose agent is the assignee; the task never
        closes it."""
        if in_thread is not None:
            fields["run_in"] = {"threadId": in_thread}
        spec = _spec(
            {
                "objective": objective,
                "assignee": assignee,
                "dependencies": list(dependencies),
                "acceptance": {"schema": acceptance_schema},
                **fields,
            }
        )
        given = spec.run_in.thread_id if spec.run_in is not None else None
        spec.scope = await self._tenant_scope(spec.scope, tenant, given)
        if given is not None:
            await self._check_given_thread(given, spec)
        for dependency in spec.dependencies:
            await self._same_tenant(spec.scope.tenant, dependency, "dependencies")
        try:
            task_id = check_task_id(task_id) if task_id else new_task_id()
        except ValueError as err:
            raise TaskError(str(err), field="taskId") from None
        at = now_iso()
        record = TaskRecord.model_validate(
            {**spec.model_dump(mode="json"), "taskId": task_id, "createdAt": at, "updatedAt": at}
        )
        # refuses a taken id or a cycle
        await asyncio.to_thread(self._store.tasks.create, _created(record))
        try:
            await self._client.start_workflow(
                TASK_WORKFLOW_TYPE,
                TaskRunInput(task=record).model_dump(mode="json"),
                id=task_id,
                task_queue=self._task_queue,
                static_summary=f"task {task_id} · {assignee}",
            )
        except Exception as err:
            await asyncio.to_thread(self._store.tasks.record, [_failed_to_start(record, err)])
            raise TaskError(f"task {task_id} could not start: {err}") from err
        return await self._load(task_id)

    async def _same_tenant(self, tenant: str | None, dependency: str, field: str) -> None:
        """TaskError naming `field` when `dependency` is another tenant's task: a task
        may wait only on its own tenant's (whose status its events would repeat). A task
        not created yet may be named: a plan may be declared in any order."""
        theirs = await asyncio.to_thread(self._store.tasks.tenant, dependency)
        if theirs is not None and theirs != (tenant or DEFAULT_TENANT):
            raise TaskError(f"{field}: {dependency!r} is not a task of this tenant", field=field)

    async def _check_given_thread(self, thread_id: str, spec: TaskSpec) -> None:
        """TaskError naming `runIn.threadId` unless the thread is a running `AgentThread`
        of the task's tenant (another tenant's is worded as one that does not exist), or
        naming `assignee` unless the thread's agent is the task's assignee."""
        field = "runIn.threadId"
        unknown = TaskError(f"{field}: no thread {thread_id!r}", field=field)
        row = await asyncio.to_thread(self._store.threads.get, thread_id)
        if row is None or row.tenant != (spec.scope.tenant or DEFAULT_TENANT):
            raise unknown
        try:
            described = await self._client.get_workflow_handle(thread_id).describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            raise unknown from None
        if described.workflow_type != THREAD_WORKFLOW_TYPE:
            raise unknown
        if described.status != WorkflowExecutionStatus.RUNNING:
            status = described.status.name.lower() if described.status else "closed"
            raise TaskError(
                f"{field}: thread {thread_id!r} is {status}: a task runs only in a running thread",
                field=field,
            )
        if row.agent != spec.assignee:
            raise TaskError(
                f"assignee: {spec.assignee!r} is not the agent of thread {thread_id!r} "
                f"({row.agent!r}): a task run in a thread is assigned to its agent",
                field="assignee",
            )

    async def _tenant_scope(
        self, scope: TaskScope, tenant: str | None, given_thread: str | None = None
    ) -> TaskScope:
        """`scope` with the task's tenant: `tenant`, else its thread's (`scope.threadId`,
        then `given_thread`, the one it runs in); TaskError naming
        `tenant` for a bad name or one that contradicts `scope.tenant`."""
        if tenant is not None:
            try:
                check_tenant(tenant)
            except ValueError as err:
                raise TaskError(str(err), field="tenant") from None
            if scope.tenant not in (None, tenant):
                raise TaskError(
                    f"scope.tenant {scope.tenant!r} is not the tenant {tenant!r} the task is "
                    "created for",
                    field="scope.tenant",
                )
        elif scope.tenant is None and scope.thread_id is not None:
            tenant = await asyncio.to_thread(self._store.threads.tenant, scope.thread_id)
        elif scope.tenant is None and given_thread is not None:
            tenant = await asyncio.to_thread(self._store.threads.tenant, given_thread)
        if tenant is None or tenant == DEFAULT_TENANT:
            return scope  # `default`'s: left out, as before tenants
        return scope.model_copy(update={"tenant": tenant})

    def find(self, task_id: str) -> TaskRecord | None:
        """The task as the store has it, or None."""
        return self._store.tasks.get(task_id)

    def get(self, task_id: str) -> TaskRecord:
        """The task as the store has it; `TaskNotFound` naming the id."""
        record = self._store.tasks.get(task_id)
        if record is None:
            raise TaskNotFound(f"no task {task_id!r}")
        return record

    async def _load(self, task_id: str) -> TaskRecord:
        """`get`, off the event loop."""
        return await asyncio.to_thread(self.get, task_id)

    async def show(self, task_id: str) -> TaskRecord:
        """The task as the store has it, once an end its run did not write (an open task's
        run closed through Temporal) is recorded; `TaskNotFound` naming the id."""
        record = await self._load(task_id)
        if not record.terminal and await self._record_unwritten_end(record):
            record = await self._load(task_id)
        return record

    async def _record_unwritten_end(self, record: TaskRecord) -> bool:
        """Record the end of open task `record` when its run closed without writing it;
        True when this call stored it. The commands alone trust the store (False):
        `weft.Tasks` asks Temporal (client/tasks.py)."""
        return False

    def list(
        self,
        *,
        statuses: Sequence[str] | None = None,
        session_id: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> builtins.list[TaskRecord]:
        """Tasks, most recently changed first (of one `tenant`, when given)."""
        return self._store.tasks.list(
            statuses=statuses, session_id=session_id, tenant=tenant, limit=limit
        )

    async def list_checked(
        self,
        *,
        statuses: Sequence[str] | None = None,
        session_id: str | None = None,
        tenant: str | None = None,
        limit: int = 100,
    ) -> builtins.list[TaskRecord]:
        """`list`, once the ends the listed open tasks' runs did not write are recorded
        (with `weft.Tasks`: one visibility query finds them, client/run_close.py)."""

        def listed() -> builtins.list[TaskRecord]:
            return self.list(statuses=statuses, session_id=session_id, tenant=tenant, limit=limit)

        records = await asyncio.to_thread(listed)
        if await self._record_listed_ends([r for r in records if not r.terminal]):
            records = await asyncio.to_thread(listed)  # their status (and order) moved
        return records

    async def _record_listed_ends(self, open_tasks: builtins.list[TaskRecord]) -> bool:
        """`_record_unwritten_end` for the open tasks of a listing; True when any end was
        stored. The commands alone trust the store (False)."""
        return False

    def snapshot(
        self, *, session_id: str | None = None, tenant: str | None = None, limit: int = 500
    ) -> TaskSnapshot:
        """`task_snapshot`: active, waiting, failed, lost and recent terminal tasks, the
        graph, the current attempts and delivery, from the store."""
        return task_snapshot(self.list(session_id=session_id, tenant=tenant, limit=limit))

    def events(self, task_id: str) -> builtins.list[Event]:
        """The task's log, oldest first."""
        self.get(task_id)
        return self._store.tasks.events(task_id)

    async def cancel(self, task_id: str, reason: str | None = None) -> None:
        """Ask the task to stop: it ends `cancelled`, closing its running attempt's thread.
        TaskError once it has ended (a run closed through Temporal included)."""
        await self._unfinished(task_id, "cancel")
        try:
            await self._handle(task_id).signal(
                SIGNAL_CANCEL_TASK, CancelTask(reason=reason).model_dump(mode="json")
            )
        except RPCError as err:
            await self._refuse_closed_run(task_id, "cancel", err)

    async def append_progress(
        self, task_id: str, message: str, data: dict[str, Any] | None = None
    ) -> None:
        """Add a progress entry to an unfinished task (`task.progress`)."""
        try:
            entry = TaskProgress(message=message, data=data)
        except ValidationError as err:
            raise TaskError(
                f"progress of {task_id}: {describe_validation_error(err)}", field=_loc(err)
            ) from None
        await self._unfinished(task_id, "append progress to")
        try:
            await self._handle(task_id).signal(
                SIGNAL_APPEND_PROGRESS, entry.model_dump(mode="json")
            )
        except RPCError as err:
            await self._refuse_closed_run(task_id, "append progress to", err)

    async def retry(self, task_id: str, reason: str | None = None) -> TaskRecord:
        """Run a failed, timed out or cancelled task again: a new run of its workflow
        makes new attempts (up to `maxAttempts` more); the earlier ones stay. A task whose
        run was closed through Temporal is retried as a failed (or cancelled) one."""
        record = await self.show(task_id)
        if record.status not in UNSUCCESSFUL_STATUSES:
            raise TaskError(
                f"task {task_id} is {record.status}: only a failed, timed out or cancelled "
                "task can be retried"
            )
        start = TaskRunInput(task=record, retry_reason=reason or "retried")
        # The run that wrote the task's end returns a moment after it: a retry right after
        # the end waits (bounded) for it to close, then starts the new run.
        for last_try in (False, True):
            try:
                await self._client.start_workflow(
                    TASK_WORKFLOW_TYPE,
                    start.model_dump(mode="json"),
                    id=task_id,
                    task_queue=self._task_queue,
                    static_summary=f"task {task_id} · {record.assignee} (retry)",
                )
                break
            except WorkflowAlreadyStartedError:
                if last_try:
                    raise TaskError(
                        f"task {task_id} is still finishing its last run; retry it again"
                    ) from None
                await run_closed(self._handle(task_id), LAST_RUN_WAIT_SECONDS)
        return record

    async def start(
        self, task_id: str, *, by: str | None = None, reason: str | None = None
    ) -> TaskRecord:
        """Start a task created with `auto_start=False`: it is queued behind its
        dependencies (`task.queued` names who started it)."""
        return await self._decide(task_id, "start", UPDATE_START_TASK, TaskCommand, by, reason)

    async def update(
        self,
        task_id: str,
        *,
        objective: str | None = None,
        constraints: TaskConstraints | dict[str, Any] | None = None,
        acceptance: TaskAcceptance | dict[str, Any] | None = None,
        by: str | None = None,
        reason: str | None = None,
    ) -> TaskRecord:
        """Change the objective, constraints or acceptance (each replaced whole) of a task
        whose attempts have not started (`task.updated`)."""
        fields = {"objective": objective, "constraints": constraints, "acceptance": acceptance}
        changes = _model(TaskChanges, {**fields, "by": by, "reason": reason})
        if not changes.changes():
            raise TaskError(
                f"update of {task_id}: nothing to change (objective, constraints, acceptance)",
                field="body",
            )
        if changes.acceptance is not None:
            _check_schema(changes.acceptance.schema_)
        return await self._update(task_id, "update", UPDATE_UPDATE_TASK, changes)

    async def delegate(
        self,
        task_id: str,
        to: str,
        *,
        by: str | None = None,
        reason: str | None = None,
        start: bool = False,
    ) -> TaskRecord:
        """Hand a task whose attempts have not started to agent `to` (`task.delegated`):
        its attempts run as `to`. `start`: also start a task created not to start."""
        command = _model(DelegateTask, {"to": to, "by": by, "reason": reason})
        held = await self._load(task_id)
        given = held.run_in
        if given is not None and command.to != held.assignee:
            raise TaskError(
                f"to: task {task_id} runs in thread {given.thread_id!r}, whose agent is its "
                "assignee: it is delegated to no other agent",
                field="to",
            )
        record = await self._update(task_id, "delegate", UPDATE_DELEGATE_TASK, command)
        if start and not record.auto_start and record.status == "accepted":
            record = await self.start(task_id, by=by, reason=reason)
        return record

    async def link(
        self,
        task_id: str,
        depends_on: str,
        *,
        by: str | None = None,
        reason: str | None = None,
    ) -> TaskRecord:
        """Make a task whose attempts have not started depend on `depends_on`
        (`task.dependency.updated`); a cycle is refused, naming it."""
        command = _model(LinkTasks, {"dependsOn": depends_on, "by": by, "reason": reason})
        tenant = await asyncio.to_thread(self._store.tasks.tenant, task_id)
        await self._same_tenant(tenant, depends_on, "dependsOn")
        return await self._update(task_id, "link", UPDATE_LINK_TASKS, command)

    async def unlink(
        self,
        task_id: str,
        depends_on: str,
        *,
        by: str | None = None,
        reason: str | None = None,
    ) -> TaskRecord:
        """Remove the dependency of a task whose attempts have not started on `depends_on`."""
        command = _model(LinkTasks, {"dependsOn": depends_on, "by": by, "reason": reason})
        return await self._update(task_id, "unlink", UPDATE_UNLINK_TASKS, command)

    async def pause(
        self, task_id: str, *, by: str | None = None, reason: str | None = None
    ) -> TaskRecord:
        """Pause a task: no new attempt starts until `resume`; a running attempt runs to
        its end (an accepted answer still completes the task)."""
        return await self._decide(task_id, "pause", UPDATE_PAUSE_TASK, TaskCommand, by, reason)

    async def resume(
        self, task_id: str, *, by: str | None = None, reason: str | None = None
    ) -> TaskRecord:
        """Resume a paused task: it returns to where it was."""
        return await self._decide(task_id, "resume", UPDATE_RESUME_TASK, TaskCommand, by, reason)

    async def complete(
        self,
        task_id: str,
        *,
        response: str | None = None,
        structured: Any = None,
        by: str | None = None,
        reason: str | None = None,
    ) -> TaskRecord:
        """Complete an unfinished task with an operator's output (`task.completed` with
        `by`); with an acceptance schema, `structured` must be valid against it. A running
        attempt ends `cancelled` and its thread is closed."""
        command = _model(
            CompleteTask,
            {"response": response, "structured": structured, "by": by, "reason": reason},
        )
        schema = (await self._unfinished(task_id, "complete")).acceptance.schema_
        if schema is not None:
            _check_output(command.structured, schema)
        return await self._update(task_id, "complete", UPDATE_COMPLETE_TASK, command)

    async def fail(
        self, task_id: str, *, by: str | None = None, reason: str | None = None
    ) -> TaskRecord:
        """Fail an unfinished task (`task.failed` with `by`); it can be retried."""
        return await self._decide(task_id, "fail", UPDATE_FAIL_TASK, TaskCommand, by, reason)

    async def wait(self, task_id: str) -> TaskRecord:
        """Wait for the task's current run to end; the task as it then is (a run closed
        through Temporal ends the wait too, its end recorded)."""
        await self._load(task_id)
        try:
            await self._handle(task_id).result()
        except WorkflowFailureError:
            pass  # closed without returning (terminated, cancelled there): `show` records how
        return await self.show(task_id)

    async def _decide(
        self,
        task_id: str,
        verb: str,
        update: str,
        model: type[TaskCommand],
        by: str | None,
        reason: str | None,
    ) -> TaskRecord:
        return await self._update(
            task_id, verb, update, _model(model, {"by": by, "reason": reason})
        )

    async def _update(self, task_id: str, verb: str, update: str, command: BaseModel) -> TaskRecord:
        """Run a command on the task's workflow; its refusal as a TaskError naming the
        field (None: the task's state)."""
        await self._unfinished(task_id, verb)
        payload = command.model_dump(mode="json", by_alias=True, exclude_none=True)
        try:
            await self._handle(task_id).execute_update(update, payload)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type == TASK_REFUSED:
                field = cause.details[0] if cause.details else None
                raise TaskError(cause.message, field=field) from None
            raise TaskError(f"cannot {verb} task {task_id}: {cause or err}") from None
        except RPCError as err:
            await self._refuse_closed_run(task_id, verb, err)
        return await self._load(task_id)

    def _handle(self, task_id: str) -> WorkflowHandle[Any, Any]:
        return self._client.get_workflow_handle(task_id)

    async def _refuse_closed_run(self, task_id: str, verb: str, err: RPCError) -> NoReturn:
        """A command found the task's run gone (NOT_FOUND: closed, or never started): a
        TaskError saying what the task is, once an end its run did not write is recorded;
        any other RPC error is raised as it is."""
        if err.status != RPCStatusCode.NOT_FOUND:
            raise err
        record = await self.show(task_id)
        why = f" ({record.reason})" if record.terminal and record.reason else ""
        raise TaskError(
            f"cannot {verb} task {task_id}: it is {record.status}{why} and its run has ended"
        ) from None

    async def _unfinished(self, task_id: str, verb: str) -> TaskRecord:
        record = await self._load(task_id)
        if record.status in TERMINAL_STATUSES:
            raise TaskError(f"cannot {verb} task {task_id}: it is {record.status}")
        return record


def now_iso() -> str:
    """Current UTC time as ISO-8601 with milliseconds and a Z suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _loc(err: ValidationError) -> str:
    """The input field the first error is about, dotted (`constraints.maxAttempts`)."""
    return ".".join(str(p) for p in err.errors()[0]["loc"]) or "body"


def _model(model: type[_M], fields: dict[str, Any]) -> _M:
    """A command's input, checked; TaskError naming the field."""
    given = {k: v for k, v in fields.items() if v is not None}
    try:
        return model.model_validate(given)
    except ValidationError as err:
        raise TaskError(
            f"invalid command: {describe_validation_error(err)}", field=_loc(err)
        ) from None


def _spec(fields: dict[str, Any]) -> TaskSpec:
    """The checked spec; TaskError naming the field or the schema's problem."""
    try:
        spec = TaskSpec.model_validate(fields)
    except ValidationError as err:
        raise TaskError(
            f"invalid task: {describe_validation_error(err)}", field=_loc(err)
        ) from None
    _check_schema(spec.acceptance.schema_)
    return spec


def _check_schema(schema: dict[str, Any] | None) -> None:
    """An acceptance schema must be a valid JSON Schema; TaskError naming where not."""
    if schema is None:
        return
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        raise TaskError(
            f"acceptance.schema at {where}: {err.message}", field="acceptance.schema"
        ) from None


def _check_output(structured: Any, schema: dict[str, Any]) -> None:
    """An operator's output must meet the task's acceptance schema, like an attempt's."""
    if structured is None:
        raise TaskError(
            "the task has an acceptance schema: complete it with a `structured` output "
            "valid against it",
            field="structured",
        )
    error = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(structured)
    )
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise TaskError(
            f"the output does not meet the task's schema at {where}: {error.message}",
            field="structured",
        )


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
