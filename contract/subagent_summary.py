"""The `subagent_job_summary` of a thread (seed 001): its child graph, the tasks it and its
descendants created, each task's assigned thread, the jobs that belong to them with their
progress, and whether each child and each job can still make progress.

Built by one pure function (`build_summary`) from facts the event log states: the subagent
registry entries (`subagent.*`), the last session outcome of each child
(`subagent.completed` / `subagent.failed`), each child's own status and pending actions
(`action.required` / `action.resolved`), the tasks' records (`task.*`) and the jobs'
(`job.*`: the thread a job belongs to is in its `job.created`). The client reads
them from the store's projections (client/subagent_summary.py); the same function over the
events alone gives the same summary (tests/test_subagent_summary.py). What no stored fact
says is `unknown`, never guessed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import Field

from weft.contract.jobs import JobRecord
from weft.contract.tasks import UNSUCCESSFUL_STATUSES, TaskRecord
from weft.contract.wire import CamelModel

# A thread in one of these statuses runs no more (store/threads.py CLOSED_STATUSES).
CLOSED_THREAD_STATUSES = frozenset({"completed", "cancelled", "failed"})
# The summary lists at most this many children; `truncated` says when more exist.
MAX_CHILDREN = 500

ProgressState = Literal["running", "waiting_on_person", "idle", "closing", "closed", "lost"]
RetryState = Literal["possible", "not_possible", "unknown"]

JOBS_LINKED = (
    "the jobs created for the thread or one of its subagents (`threadId` at creation: "
    "weft.Jobs, `weft job run --thread`, POST /jobs)"
)
LIVENESS_UNKNOWN = (
    "liveness: whether a worker is running an open child's or job's workflow is not "
    "stored; only Temporal knows it, and it was not asked"
)
JobState = Literal["running", "completed", "stopped", "lost"]


class Recoverability(CamelModel):
    """Whether a child can still make progress and, when it failed or is lost, whether a
    retry is possible; `reason` says how weft knows."""

    state: ProgressState
    can_progress: bool | None = Field(description="None: weft cannot know")
    retry: RetryState | None = Field(
        default=None, description="for a failed or lost child only; None otherwise"
    )
    reason: str


class SubagentNode(CamelModel):
    """One child in the graph (its registry entry, compacted)."""

    thread_id: str
    name: str
    agent: str
    parent_thread_id: str
    depth: int = Field(description="1 for the thread's own children")
    status: str = Field(description="the parent's registry status")
    thread_status: str | None = Field(
        description="the child thread's own status, as it last stored it; None if it stored none"
    )
    resumable: bool
    blocking: bool
    closed: bool
    started_at: str
    ended_at: str | None = Field(description="when its close was recorded; None while open")
    last_session: Literal["completed", "failed"] | None = None
    stop_reason: str | None = None
    status_note: str | None = None
    pending_actions: list[str] = Field(
        default_factory=list, description="kinds of the actions it waits on a person for"
    )
    workflow_status: str | None = Field(
        default=None, description="Temporal's status of its workflow, when asked"
    )
    recoverability: Recoverability


class TaskAttemptRef(CamelModel):
    attempt_id: str
    number: int
    thread_id: str
    status: str


class TaskEntry(CamelModel):
    """A task a thread of the graph created, with its current attempt's thread."""

    task_id: str
    created_by: str = Field(description="the thread that created it (its scope.threadId)")
    objective: str
    assignee: str
    delegated_to: str | None = None
    status: str
    attempts: int
    current_attempt: TaskAttemptRef | None = None
    assigned_thread_id: str | None = Field(
        default=None, description="the current (or last) attempt's thread"
    )
    retryable: bool = Field(
        description="`Tasks.retry` accepts it now (failed, timed out, cancelled)"
    )


class TaskProgressSummary(CamelModel):
    total: int
    counts: dict[str, int]
    items: list[TaskEntry]


class JobRecoverability(CamelModel):
    """Whether a job can still make progress and, once stopped, whether it can be resumed;
    `reason` says how weft knows."""

    state: JobState
    can_progress: bool | None = Field(description="None: weft cannot know")
    retry: RetryState | None = Field(
        default=None, description="for a cancelled, failed or lost job only; None otherwise"
    )
    reason: str


class JobEntry(CamelModel):
    """A job that belongs to a thread of the graph, with its items by status."""

    job_id: str
    thread_id: str = Field(description="the thread it belongs to")
    assignee: str
    status: str
    progress: dict[str, int] = Field(
        description="its items by status: total, pending, running, completed, failed, cancelled"
    )
    reason: str | None = Field(default=None, description="why it ended, when it did")
    workflow_status: str | None = Field(
        default=None, description="Temporal's status of its workflow, when asked"
    )
    recoverability: JobRecoverability


class JobsSummary(CamelModel):
    linked: bool
    reason: str
    total: int = 0
    counts: dict[str, int] = Field(default_factory=dict, description="the jobs by status")
    items: list[JobEntry] = Field(default_factory=list)


class SubagentJobSummary(CamelModel):
    """Seed 001's `subagent_job_summary` of one thread (the snapshot's `subagentJobSummary`)."""

    thread_id: str
    thread_status: str | None
    source: Literal["store"] = "store"
    updated_at: str
    children: list[SubagentNode] = Field(description="depth first, oldest sibling first")
    truncated: bool = False
    tasks: TaskProgressSummary
    jobs: JobsSummary
    unknown: list[str] = Field(default_factory=list)


class ChildFacts(CamelModel):
    """What is known of one child, the input of `build_summary`."""

    entry: dict[str, Any]
    parent_thread_id: str
    depth: int
    last_session: Literal["completed", "failed"] | None = None
    thread_status: str | None = None
    pending_actions: list[str] = Field(default_factory=list)
    workflow_status: str | None = None


def last_sessions(events: Sequence[Any]) -> dict[str, Literal["completed", "failed"]]:
    """Each child's last session outcome, from its parent's `subagent.completed|failed`."""
    found: dict[str, Literal["completed", "failed"]] = {}
    for event in events:
        child = (event.payload or {}).get("childThreadId")
        if child and event.type in ("subagent.completed", "subagent.failed"):
            found[child] = "completed" if event.type == "subagent.completed" else "failed"
    return found


def pending_action_kinds(events: Sequence[Any]) -> list[str]:
    """The kinds of the actions still waiting for a person, from `action.required` and
    `action.resolved` (scoped-variable requests, which have no `actionType`, excluded)."""
    pending: dict[str, str] = {}
    for event in events:
        payload = event.payload or {}
        if event.type == "action.required" and "actionType" in payload and event.action_id:
            pending[event.action_id] = str(payload["actionType"])
        elif event.type == "action.resolved":
            pending.pop(event.action_id or "", None)
    return list(pending.values())


def recoverability(facts: ChildFacts) -> Recoverability:
    """How the child stands, from stored facts (and Temporal's status when asked)."""
    entry = facts.entry
    status = str(entry.get("status") or "")
    resumable = bool(entry.get("resumable"))
    failed = status == "failed" or facts.last_session == "failed"
    no_retry = (
        "a closed child takes no more messages and weft does not restart it; the parent can "
        "create a new child"
    )
    if entry.get("closed") or facts.thread_status in CLOSED_THREAD_STATUSES:
        reason = "its close is recorded by its parent"
        if not entry.get("closed"):
            reason = (
                f"its thread stored status {facts.thread_status!r}; its parent has not "
                "recorded the close"
            )
        return Recoverability(
            state="closed",
            can_progress=False,
            retry="not_possible" if failed else None,
            reason=f"{reason}. {no_retry}" if failed else reason,
        )
    if facts.workflow_status is not None and facts.workflow_status != "RUNNING":
        return Recoverability(
            state="lost",
            can_progress=False,
            retry="not_possible",
            reason=f"Temporal reports its workflow {facts.workflow_status.lower()} but it "
            f"recorded no close (a hard terminate or a timeout). {no_retry}",
        )
    if facts.pending_actions:
        return Recoverability(
            state="waiting_on_person",
            can_progress=True,
            reason=f"it waits for a person to answer: {', '.join(facts.pending_actions)}",
        )
    if status in ("completed", "failed"):
        return Recoverability(
            state="closing",
            can_progress=False,
            retry="not_possible" if failed else None,
            reason="its session ended and a non-resumable child ends itself",
        )
    if status == "idle":
        return Recoverability(
            state="idle",
            can_progress=True,
            retry="possible" if failed and resumable else None,
            reason="it waits for a message (subagent_message)"
            + ("; its last session failed, a new message starts another" if failed else ""),
        )
    return Recoverability(
        state="running",
        can_progress=None if facts.workflow_status is None else True,
        reason="it is open and running"
        + ("" if facts.workflow_status is not None else "; whether a worker runs it is unknown"),
    )


def _node(facts: ChildFacts) -> SubagentNode:
    entry = facts.entry
    closed = bool(entry.get("closed"))
    return SubagentNode(
        thread_id=str(entry.get("reference") or ""),
        name=str(entry.get("name") or ""),
        agent=str(entry.get("agent") or ""),
        parent_thread_id=facts.parent_thread_id,
        depth=facts.depth,
        status=str(entry.get("status") or ""),
        thread_status=facts.thread_status,
        resumable=bool(entry.get("resumable")),
        blocking=bool(entry.get("blocking", True)),
        closed=closed,
        started_at=str(entry.get("createdAt") or ""),
        ended_at=(entry.get("updatedAt") or None) if closed else None,
        last_session=facts.last_session,
        stop_reason=entry.get("stopReason"),
        status_note=entry.get("statusNote"),
        pending_actions=facts.pending_actions,
        workflow_status=facts.workflow_status,
        recoverability=recoverability(facts),
    )


def _task(record: TaskRecord) -> TaskEntry:
    attempt = record.current_attempt()
    ref = (
        None
        if attempt is None
        else TaskAttemptRef(
            attempt_id=attempt.attempt_id,
            number=attempt.number,
            thread_id=attempt.thread_id,
            status=attempt.status,
        )
    )
    return TaskEntry(
        task_id=record.task_id,
        created_by=record.scope.thread_id or "",
        objective=record.objective[:200],
        assignee=record.assignee,
        delegated_to=record.delegated_to,
        status=record.status,
        attempts=len(record.attempts),
        current_attempt=ref,
        assigned_thread_id=None if attempt is None else attempt.thread_id,
        retryable=record.status in UNSUCCESSFUL_STATUSES,
    )


def job_recoverability(job: JobRecord, workflow_status: str | None) -> JobRecoverability:
    """How the job stands, from its record (and Temporal's status of its run when asked)."""
    c = job.counts
    unfinished = f"{c.pending} pending, {c.failed} failed, {c.cancelled} cancelled"
    if job.status == "completed":
        return JobRecoverability(
            state="completed", can_progress=False, reason="every item completed"
        )
    if job.status in ("cancelled", "failed"):
        return JobRecoverability(
            state="stopped",
            can_progress=False,
            retry="possible",
            reason=f"it ended {job.status}; `weft job resume` runs its unfinished items "
            f"({unfinished})",
        )
    if workflow_status is not None and workflow_status != "RUNNING":
        return JobRecoverability(
            state="lost",
            can_progress=False,
            retry="not_possible",
            reason=f"Temporal reports its workflow {workflow_status.lower()} but it recorded "
            "no end (a hard terminate); a job must end before it can be resumed",
        )
    return JobRecoverability(
        state="running",
        can_progress=None if workflow_status is None else True,
        reason=f"{c.running} items running, {c.pending} pending"
        + ("" if workflow_status is not None else "; whether a worker runs it is unknown"),
    )


def _job(job: JobRecord, workflow_status: str | None) -> JobEntry:
    progress = job.counts.model_dump(mode="json")
    return JobEntry(
        job_id=job.job_id,
        thread_id=job.thread_id or "",
        assignee=job.assignee,
        status=job.status,
        progress=progress,
        reason=job.reason if job.terminal else None,
        workflow_status=workflow_status,
        recoverability=job_recoverability(job, workflow_status),
    )


def build_summary(
    thread_id: str,
    *,
    thread_status: str | None,
    children: Sequence[ChildFacts],
    tasks: Sequence[TaskRecord],
    updated_at: str,
    jobs: Sequence[JobRecord] = (),
    job_workflow_statuses: Mapping[str, str] | None = None,
    truncated: bool = False,
    liveness_checked: bool = False,
) -> SubagentJobSummary:
    """The summary from what is known; `children` depth first, `tasks` and `jobs` of the
    graph's threads, `job_workflow_statuses` (job id → Temporal's status) when asked."""
    items = sorted((_task(t) for t in tasks), key=lambda t: (t.created_by, t.task_id))
    counts: Mapping[str, int] = Counter(t.status for t in items)
    statuses = job_workflow_statuses or {}
    by_thread = sorted(jobs, key=lambda j: (j.thread_id or "", j.created_at, j.job_id))
    job_items = [_job(j, statuses.get(j.job_id)) for j in by_thread]  # oldest first
    job_counts: Mapping[str, int] = Counter(j.status for j in job_items)
    unknown = [] if liveness_checked else [LIVENESS_UNKNOWN]
    return SubagentJobSummary(
        thread_id=thread_id,
        thread_status=thread_status,
        updated_at=updated_at,
        children=[_node(c) for c in children],
        truncated=truncated,
        tasks=TaskProgressSummary(
            total=len(items), counts=dict(sorted(counts.items())), items=items
        ),
        jobs=JobsSummary(
            linked=True,
            reason=JOBS_LINKED,
            total=len(job_items),
            counts=dict(sorted(job_counts.items())),
            items=job_items,
        ),
        unknown=unknown,
    )
