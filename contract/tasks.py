"""Tasks (seed 001, 003): a unit of work with an objective, an assignee agent, attempts,
dependencies, progress and output refs, and the `task.*` events its read model folds from.

A task's events are its own log, stored under the task id as the log key. Every fact is an
event, and `apply_event` folds them into a `TaskRecord`: the store's `tasks` row, the
`TaskRun` workflow's state and a rebuild from the log are the same fold.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from weft.contract.budget import Budget
from weft.contract.tenants import TenantName
from weft.contract.wire import CamelModel

TASK_WORKFLOW_TYPE = "TaskRun"
SIGNAL_CANCEL_TASK = "cancel_task"
SIGNAL_APPEND_PROGRESS = "append_task_progress"
SIGNAL_DEPENDENCY_SETTLED = "dependency_settled"
QUERY_TASK = "task"
# The commands the running task decides itself (Temporal updates: refused before history
# when the task's state forbids them, with the reason).
UPDATE_UPDATE_TASK = "update_task"
UPDATE_START_TASK = "start_task"
UPDATE_PAUSE_TASK = "pause_task"
UPDATE_RESUME_TASK = "resume_task"
UPDATE_COMPLETE_TASK = "complete_task"
UPDATE_FAIL_TASK = "fail_task"
UPDATE_LINK_TASKS = "link_tasks"
UPDATE_UNLINK_TASKS = "unlink_tasks"
UPDATE_DELEGATE_TASK = "delegate_task"
# The type of the ApplicationError a refused command fails with; its first detail is the
# field refused (None: the task's state refused it).
TASK_REFUSED = "TaskRefused"

ACTIVITY_TASK_RECORD = "task.record"
ACTIVITY_TASK_DEPENDENCIES = "task.dependencies"
ACTIVITY_TASK_DEPENDENTS = "task.dependents"
ACTIVITY_TASK_ATTEMPT = "task.attempt"
ACTIVITY_TASK_LINK = "task.link"
ACTIVITY_TASK_LOSE = "task.lose"

TASK_ID_PATTERN = re.compile(r"^task-[0-9a-f]{12}$")

TaskStatus = Literal[
    "accepted",
    "queued",
    "running",
    "waiting_input",
    "waiting_permission",
    "waiting_resource",
    "blocked",
    "retrying",
    "paused",
    "lost",
    "timed_out",
    "completed",
    "failed",
    "cancelled",
]
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled", "timed_out"})
# A dependency that ended in one of these will not complete unless retried.
UNSUCCESSFUL_STATUSES: frozenset[str] = TERMINAL_STATUSES - {"completed"}

AttemptStatus = Literal["running", "completed", "failed", "cancelled", "timed_out", "lost"]

# The status each lifecycle event sets; events absent here leave the status as it is.
STATUS_OF_EVENT: dict[str, str] = {
    "task.created": "accepted",
    "task.queued": "queued",
    "task.blocked": "blocked",
    "task.started": "running",
    "task.attempt.started": "running",
    "task.retrying": "retrying",
    "task.completed": "completed",
    "task.failed": "failed",
    "task.timed_out": "timed_out",
    "task.cancelled": "cancelled",
    "task.paused": "paused",
    "task.lost": "lost",
}


def unused(value: Any) -> bool:
    """Whether an optional field holds nothing (None, or an empty list or dict).

    A field added to a model that crosses Temporal is left out of the JSON while unused
    (`Field(exclude_if=unused)`): the previous release's workers validate these models
    with `extra="forbid"` and refuse a field they do not know, even as `null`, so during
    a rolling deploy an input that does not use the new field must be written exactly as
    that release wrote it (tests/test_task_wire_compat.py holds its shapes)."""
    return value is None or (isinstance(value, list | dict) and not value)


class TaskError(ValueError):
    """A task command was refused; the message names the task and what is wrong, and
    `field` the input field refused (None when the task's state refused the command)."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class TaskNotFound(TaskError, LookupError):
    """No task has this id."""

    def __init__(self, message: str) -> None:
        super().__init__(message, field="taskId")


class TaskScope(CamelModel):
    """Where the task belongs: a session, a thread, or a parent task (any may be absent)."""

    session_id: str | None = Field(default=None, min_length=1, max_length=255)
    thread_id: str | None = Field(default=None, min_length=1, max_length=255)
    parent_task_id: str | None = Field(default=None, min_length=1, max_length=255)
    # None is `default`'s: the attempts of a task without one start as before tenants
    # (no tenant in their input, no `WeftTenant`), so older runs replay unchanged.
    tenant: TenantName | None = Field(
        default=None, description="the tenant the task and its attempt threads belong to"
    )


class TaskConstraints(CamelModel):
    """Limits on the task's work: attempts, a deadline from creation, and each attempt
    thread's budget (docs/budgets.md)."""

    max_attempts: int = Field(default=1, ge=1, le=100)
    deadline_seconds: float | None = Field(default=None, gt=0, le=30 * 24 * 3600.0)
    budget: Budget | None = None
    lost_after_seconds: float = Field(
        default=30,
        ge=1,
        le=3600,
        description="an attempt whose worker sends no heartbeat for this long is lost",
    )


class TaskAcceptance(CamelModel):
    """When an attempt is accepted: its turn completes and, with `schema`, its answer is
    JSON that validates against it."""

    schema_: dict[str, Any] | None = Field(default=None, alias="schema")


class TaskRunIn(CamelModel):
    """Where the task's attempts run when not in threads of their own: `threadId`, a
    running `AgentThread` of the task's tenant whose agent is the assignee; each attempt
    is a new turn of it, and the task never closes it."""

    thread_id: str = Field(min_length=1, max_length=255)


class TaskSpec(CamelModel):
    """What `create` is given: the task without its lifecycle."""

    objective: str = Field(min_length=1, max_length=200_000)
    assignee: str = Field(min_length=1, max_length=255, description="the agent that runs it")
    scope: TaskScope = Field(default_factory=TaskScope)
    constraints: TaskConstraints = Field(default_factory=TaskConstraints)
    acceptance: TaskAcceptance = Field(default_factory=TaskAcceptance)
    dependencies: list[str] = Field(default_factory=list, max_length=1000)
    auto_start: bool = Field(
        default=True, description="false: the task waits for `start` before it is queued"
    )
    run_in: TaskRunIn | None = Field(
        default=None,
        exclude_if=unused,  # new since the previous release: left out unless used
        description="a given thread each attempt runs as a turn of (none: a thread each)",
    )

    @field_validator("dependencies")
    @classmethod
    def _dependency_ids(cls, value: list[str]) -> list[str]:
        for task_id in value:
            check_task_id(task_id, "dependencies")
        if len(set(value)) != len(value):
            raise ValueError("dependencies name a task more than once")
        return value


class TaskOutput(CamelModel):
    """Where an accepted attempt's result is: the stored message and its parsed JSON. An
    operator's `complete` gives the output itself: no thread, no message."""

    thread_id: str | None = None
    message_id: str | None = None
    response: str | None = None
    structured: Any = None


class TaskAttempt(CamelModel):
    """One execution attempt, bound to the thread that ran it; never overwritten by a retry."""

    attempt_id: str
    number: int
    run_id: str = Field(description="the TaskRun workflow run that made the attempt")
    thread_id: str
    status: AttemptStatus = "running"
    started_at: str
    ended_at: str | None = None
    turn_id: str | None = None
    output: TaskOutput | None = None
    error: str | None = None


class TaskProgress(CamelModel):
    """A progress entry appended while the task runs."""

    message: str = Field(min_length=1, max_length=20_000)
    data: dict[str, Any] | None = None
    at: str | None = None


class TaskDelivery(CamelModel):
    """Whether the task's result is available to its requester: `pending` until an
    attempt is accepted, then `stored` (readable from the store by `outputRef`)."""

    state: Literal["pending", "stored", "none"] = "pending"
    output_ref: str | None = None


class TaskRecord(TaskSpec):
    """The task read model: the spec plus everything its events established."""

    task_id: str
    status: TaskStatus = "accepted"
    created_at: str
    updated_at: str
    attempts: list[TaskAttempt] = Field(default_factory=list)
    progress: list[TaskProgress] = Field(default_factory=list)
    output: TaskOutput | None = None
    delivery: TaskDelivery = Field(default_factory=TaskDelivery)
    blocked_by: list[str] = Field(default_factory=list)
    reason: str | None = None
    ended_by: str | None = Field(
        default=None, description="who completed or failed it explicitly (`complete`, `fail`)"
    )
    delegated_to: str | None = Field(
        default=None, description="the agent it was delegated to (`task.delegated`)"
    )

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def current_attempt(self) -> TaskAttempt | None:
        return self.attempts[-1] if self.attempts else None


class TaskRunCarry(CamelModel):
    """Where a `TaskRun` that continued as new left its work, at a point where it waited
    (docs/tasks.md): the stage (`waiting`: `task.queued` not written yet; `queued`: waiting
    for dependencies or the pause before `task.started`; `attempting`: between attempts),
    the attempts this run of the task made, and what the commands asked. The task itself
    travels as `TaskRunInput.task`; the store holds the rest of its log."""

    stage: Literal["waiting", "queued", "attempting"]
    began: str = Field(description="when the run's deadline began: ISO-8601")
    made: int = Field(default=0, ge=0, description="attempts made since the run (or retry) began")
    retry_due: bool = Field(default=False, description="`task.retrying` is written next")
    start: TaskCommand | None = None
    paused_from: str | None = None


# A run continues as new once its history is this long (or Temporal suggests it), at a
# point where it waits; a test gives a lower count in `continueAfterEvents`.
TASK_RUN_HISTORY_EVENTS = 10_000


class TaskRunInput(CamelModel):
    """The `TaskRun` workflow's start input: the task as created (or as it is when retried,
    or carried by a run that continued as new, with `carried`)."""

    task: TaskRecord
    retry_reason: str | None = None
    carried: TaskRunCarry | None = None
    continue_after_events: int = Field(default=TASK_RUN_HISTORY_EVENTS, ge=40, le=50_000)

    @model_validator(mode="after")
    def _carried_fits_the_task(self) -> TaskRunInput:
        """A carried point the task's attempts can stand at (the run reads them)."""
        carried = self.carried
        if carried is None:
            return self
        if carried.made > len(self.task.attempts):
            raise ValueError("carried.made: more attempts made than the task has")
        if carried.made and carried.stage != "attempting":
            raise ValueError(f"carried.made: no attempt is made while {carried.stage}")
        if carried.retry_due and not carried.made:
            raise ValueError("carried.retryDue: no attempt was made to retry")
        return self


class CancelTask(CamelModel):
    """The `cancel_task` signal."""

    reason: str | None = Field(default=None, max_length=4096)


class TaskCommand(CamelModel):
    """`start`, `pause`, `resume`, `fail`: who asks and why, for the task's log."""

    by: str | None = Field(default=None, min_length=1, max_length=255)
    reason: str | None = Field(default=None, max_length=20_000)


class TaskChanges(TaskCommand):
    """`update_task`: the parts that change (each replaced whole); the rest stay."""

    objective: str | None = Field(default=None, min_length=1, max_length=200_000)
    constraints: TaskConstraints | None = None
    acceptance: TaskAcceptance | None = None

    def changes(self) -> dict[str, Any]:
        """The changed parts as wire JSON."""
        return self.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude={"by", "reason"}
        )


class CompleteTask(TaskCommand):
    """`complete_task`: an operator's outcome; with an acceptance schema, `structured` must
    be valid against it."""

    response: str | None = Field(default=None, max_length=200_000)
    structured: Any = None


class LinkTasks(TaskCommand):
    """`link_tasks` / `unlink_tasks`: the dependency edge added to or removed from the task."""

    depends_on: str

    @field_validator("depends_on")
    @classmethod
    def _dependency_id(cls, value: str) -> str:
        return check_task_id(value, "dependsOn")


class DelegateTask(TaskCommand):
    """`delegate_task`: the agent that runs the task's attempts from now on."""

    to: str = Field(min_length=1, max_length=255)


class LinkResult(CamelModel):
    """`task.link`'s answer: the stored event, or why the edge was refused."""

    event: dict[str, Any] | None = None
    refused: str | None = None
    field: str | None = None


class LoseAttempt(CamelModel):
    """`task.lose`: the lost attempt's end and `task.lost`, with the history event where
    Temporal recorded which worker started the attempt's activity, and how long it was
    silent; the activity names that worker in both."""

    events: list[dict[str, Any]]
    started_event_id: int | None = None
    silent_seconds: float


class LostResult(CamelModel):
    """`task.lose`'s answer: the attempt's end already stored (the lost attempt's worker
    wrote it before it died), or the events it recorded."""

    stored_end: dict[str, Any] | None = None
    recorded: list[dict[str, Any]] = Field(default_factory=list)


class TaskEventsInput(CamelModel):
    """`task.record`: events of one task's log, written in one transaction."""

    events: list[dict[str, Any]]


class DependencyStates(CamelModel):
    """`task.dependencies`'s answer: each dependency's status (absent: not created yet)."""

    statuses: dict[str, str] = Field(default_factory=dict)


class DependencyQuery(CamelModel):
    """`task.dependencies`: the task asking, and the ids it depends on."""

    task_id: str
    dependencies: list[str]


class AttemptInput(CamelModel):
    """`task.attempt`: ask the attempt's thread the objective and judge the answer."""

    task_id: str
    attempt_id: str
    run_id: str
    thread_id: str
    objective: str
    acceptance: TaskAcceptance


class AttemptResult(CamelModel):
    """What `task.attempt` stored: its outcome event, as the wire JSON (the workflow folds it)."""

    event: dict[str, Any]
    accepted: bool


def attempt_end_event_id(attempt_id: str) -> str:
    """The one event id an attempt's end is stored under, whoever writes it first (the
    attempt activity, or the workflow that cancels or times out the task)."""
    return f"{attempt_id}:ended"


def check_task_id(task_id: str, field: str = "taskId") -> str:
    """`task_id` if it is `task-<12 hex>`; otherwise ValueError naming `field`."""
    if not TASK_ID_PATTERN.match(task_id):
        raise ValueError(f"{field}: {task_id!r} is not a task id (task-<12 hex digits>)")
    return task_id


def find_cycle(new_task: str, dependencies: dict[str, list[str]]) -> list[str] | None:
    """A dependency path from `new_task` back to itself in `dependencies` (task → the
    tasks it depends on), as the ids along it, or None when there is no cycle."""
    path: list[str] = []
    seen: set[str] = set()

    def walk(task_id: str) -> list[str] | None:
        for dependency in dependencies.get(task_id, []):
            if dependency == new_task:
                return [*path, task_id, new_task]
            if dependency in seen:
                continue
            seen.add(dependency)
            path.append(task_id)
            found = walk(dependency)
            path.pop()
            if found:
                return found
        return None

    return walk(new_task)


def apply_event(record: TaskRecord | None, event: dict[str, Any]) -> TaskRecord | None:
    """The task after `event` (wire JSON of a `task.*` event); the same fold everywhere."""
    kind, payload = event["type"], event.get("payload") or {}
    at = str(event.get("timestamp") or "")
    if kind == "task.created":
        return TaskRecord.model_validate(payload["task"])
    if record is None:
        return None
    changes: dict[str, Any] = {"updated_at": at}
    if kind in STATUS_OF_EVENT:
        changes["status"] = STATUS_OF_EVENT[kind]
    if "reason" in payload:
        changes["reason"] = payload["reason"]
    if kind == "task.blocked":
        changes["blocked_by"] = list(payload.get("blockedBy") or [])
    elif kind in ("task.queued", "task.started"):
        changes["blocked_by"] = []
    if kind == "task.resumed":
        changes["status"] = payload.get("status") or "queued"
    if kind == "task.updated":
        update = TaskChanges.model_validate(payload.get("changes") or {})
        changes |= {
            name: getattr(update, name)
            for name in ("objective", "constraints", "acceptance")
            if getattr(update, name) is not None
        }
    if kind == "task.dependency.updated":
        edge = str(payload["dependsOn"])
        kept = [d for d in record.dependencies if d != edge]
        changes["dependencies"] = [*kept, edge] if payload.get("change") == "added" else kept
        if payload.get("change") == "removed":
            changes["blocked_by"] = [d for d in record.blocked_by if d != edge]
    if kind == "task.delegated":
        changes["assignee"] = changes["delegated_to"] = str(payload["to"])
    if kind in ("task.completed", "task.failed", "task.cancelled") and payload.get("by"):
        changes["ended_by"] = payload["by"]
    if kind == "task.progress":
        entry = TaskProgress.model_validate(payload["progress"])
        changes["progress"] = [*record.progress, entry]
    if kind.startswith("task.attempt."):
        changes["attempts"] = _with_attempt(
            record.attempts, payload["attempt"], start=kind == "task.attempt.started"
        )
    if kind == "task.completed":
        output = TaskOutput.model_validate(payload["output"])
        changes["output"] = output
        changes["delivery"] = TaskDelivery(state="stored", output_ref=output.message_id)
    elif kind in ("task.failed", "task.timed_out", "task.cancelled"):
        changes["delivery"] = TaskDelivery(state="none")
    elif kind == "task.retrying":
        changes["delivery"] = TaskDelivery()
    return record.model_copy(update=changes)


def _with_attempt(
    attempts: list[TaskAttempt], data: dict[str, Any], *, start: bool
) -> list[TaskAttempt]:
    """`attempts` with `data` merged into the attempt of the same id, or added when it
    starts one. The end of an attempt whose start was never stored (its run was cancelled
    mid-write) changes nothing: there is no attempt to end."""
    for index, known in enumerate(attempts):
        if known.attempt_id == data.get("attemptId"):
            merged = TaskAttempt.model_validate({**known.model_dump(mode="json"), **data})
            return [*attempts[:index], merged, *attempts[index + 1 :]]
    return [*attempts, TaskAttempt.model_validate(data)] if start else attempts


def rebuild(events: list[dict[str, Any]]) -> TaskRecord | None:
    """The task as its log says, from its events alone (oldest first)."""
    record: TaskRecord | None = None
    for event in events:
        record = apply_event(record, event)
    return record


ACTIVE_STATUSES: frozenset[str] = frozenset({"running", "retrying"})
WAITING_STATUSES: frozenset[str] = frozenset(
    {
        "accepted",
        "queued",
        "blocked",
        "paused",
        "waiting_input",
        "waiting_permission",
        "waiting_resource",
    }
)


class TaskEdge(CamelModel):
    """One edge of the task graph: `taskId` depends on `dependsOn`."""

    task_id: str
    depends_on: str


class TaskSnapshot(CamelModel):
    """`task_snapshot` (seed 001): the tasks by where they stand, the graph, the current
    attempts and each task's delivery, from the store."""

    active: list[TaskRecord] = Field(default_factory=list)
    waiting: list[TaskRecord] = Field(default_factory=list)
    failed: list[TaskRecord] = Field(default_factory=list)
    lost: list[TaskRecord] = Field(default_factory=list)
    recent_terminal: list[TaskRecord] = Field(default_factory=list)
    graph: list[TaskEdge] = Field(default_factory=list)
    current_attempts: dict[str, TaskAttempt] = Field(default_factory=dict)
    delivery: dict[str, TaskDelivery] = Field(default_factory=dict)


def task_snapshot(records: list[TaskRecord], *, recent: int = 20) -> TaskSnapshot:
    """The snapshot of `records` (newest first): `recent` terminal tasks at most."""
    by = {
        "active": [r for r in records if r.status in ACTIVE_STATUSES],
        "waiting": [r for r in records if r.status in WAITING_STATUSES],
        "failed": [r for r in records if r.status in ("failed", "timed_out")],
        "lost": [r for r in records if r.status == "lost"],
        "recent_terminal": [r for r in records if r.terminal][:recent],
    }
    return TaskSnapshot(
        **by,
        graph=[TaskEdge(task_id=r.task_id, depends_on=d) for r in records for d in r.dependencies],
        current_attempts={
            r.task_id: a for r in records if (a := r.current_attempt()) and a.status == "running"
        },
        delivery={r.task_id: r.delivery for r in records},
    )
