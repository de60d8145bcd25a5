"""Jobs (seed 001, 003): a batch of items, each run as a task of the job's assignee agent,
at most `concurrency` at a time, with the `job.*` and `job.item.*` events that record it.

The items live in the store (`job_items`), not in Temporal history: the `JobRun`
workflow carries a cursor into them and continues as new after a bounded number of items.
Each item becomes a task (`contract/tasks.py`) whose id is derived from the job id and the
item's index, so a claim retried after a worker died names the same task.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from weft.contract.tasks import TaskAcceptance, TaskConstraints, TaskOutput, TaskRunInput
from weft.contract.tenants import TenantName
from weft.contract.wire import CamelModel

JOB_WORKFLOW_TYPE = "JobRun"
# The `kind` of a job's `job.*` events (a scheduled effect's say "effect": docs/effects.md).
BATCH_KIND = "batch"
SIGNAL_CANCEL_JOB = "cancel_job"
QUERY_JOB = "job"

ACTIVITY_JOB_RECORD = "job.record"
ACTIVITY_JOB_LOAD = "job.load"
ACTIVITY_JOB_CLAIM = "job.claim"
ACTIVITY_JOB_ADMIT = "job.admit"

JOB_ID_PATTERN = re.compile(r"^job-[0-9a-f]{12}$")
# The most items one job holds; each is a row, and its run never holds them all at once.
MAX_ITEMS = 1_000_000

JobStatus = Literal["accepted", "running", "completed", "failed", "cancelled"]
JOB_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})
ItemStatus = Literal["pending", "running", "completed", "failed", "cancelled"]
ITEM_TERMINAL: frozenset[str] = frozenset({"completed", "failed", "cancelled"})

# The job status each job-level event sets.
STATUS_OF_JOB_EVENT: dict[str, str] = {
    "job.created": "accepted",
    "job.started": "running",
    "job.completed": "completed",
    "job.failed": "failed",
    "job.cancelled": "cancelled",
}


class JobError(ValueError):
    """A job command was refused; the message names the job, item or field at fault."""


class JobNotFound(JobError, LookupError):
    """No job has this id."""


class JobThreadNotFound(JobError, LookupError):
    """The thread a job is created for is unknown, or another tenant's (told apart by no
    one: the same refusal)."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"threadId: no thread {thread_id!r}")
        self.thread_id = thread_id


class JobRate(CamelModel):
    """The pace of a job's item starts under a shared rate-limit key (docs/jobs.md)."""

    key: str = Field(min_length=1, max_length=200)
    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    window_seconds: float = Field(
        default=60, gt=0, le=3600, description="the window the limits are counted over"
    )

    @model_validator(mode="after")
    def _caps_something(self) -> JobRate:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("a rate needs requestsPerMinute, tokensPerMinute or both")
        return self


class JobSpec(CamelModel):
    """What `create` is given, the items aside."""

    assignee: str = Field(min_length=1, max_length=255, description="the agent of every item")
    concurrency: int = Field(default=4, ge=1, le=1000, description="items running at once")
    constraints: TaskConstraints = Field(
        default_factory=TaskConstraints,
        description="each item's task: maxAttempts, deadlineSeconds, budget",
    )
    acceptance: TaskAcceptance = Field(default_factory=TaskAcceptance)
    session_id: str | None = Field(default=None, min_length=1, max_length=255)
    tenant: TenantName | None = Field(
        default=None, description="the tenant the job and its items' tasks belong to"
    )
    rate: JobRate | None = None
    thread_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=255,
        description="the thread the job belongs to (its tenant's): listed in that thread's "
        "subagent_job_summary",
    )
    items_per_run: int = Field(
        default=200,
        ge=1,
        le=5000,
        description="items a JobRun run starts before it continues as new",
    )


class JobItemSpec(CamelModel):
    """One line of an items file: the item's input (the first message of its task's
    attempts), an optional key of the caller's, and metadata returned with its result."""

    input: str = Field(min_length=1, max_length=200_000)
    key: str | None = Field(default=None, min_length=1, max_length=255)
    metadata: dict[str, Any] | None = None

    @field_validator("metadata")
    @classmethod
    def _small_metadata(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and len(json.dumps(value)) > 16_384:
            raise ValueError("metadata is over 16 KiB of JSON")
        return value


class JobCounts(CamelModel):
    """How many items stand where."""

    total: int = 0
    pending: int = 0
    running: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0

    @property
    def done(self) -> int:
        return self.completed + self.failed + self.cancelled

    def moved(self, old: str | None, new: str) -> JobCounts:
        """The counts after one item moved from `old` (None: a new item) to `new`."""
        data = self.model_dump()
        if old is not None:
            data[old] -= 1
        else:
            data["total"] += 1
        data[new] += 1
        return JobCounts.model_validate(data)


class JobRecord(JobSpec):
    """The job read model: its spec, status and counts."""

    job_id: str
    status: JobStatus = "accepted"
    counts: JobCounts = Field(default_factory=JobCounts)
    created_at: str
    updated_at: str
    reason: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in JOB_TERMINAL


class JobItem(CamelModel):
    """One item as the store has it."""

    item_id: str
    job_id: str
    index: int
    task_id: str
    input: str
    key: str | None = None
    metadata: dict[str, Any] | None = None
    status: ItemStatus = "pending"
    launches: int = Field(default=0, description="times a run of the job started its task")
    attempts: int = 0
    started_at: str | None = None
    ended_at: str | None = None
    output: TaskOutput | None = None
    error: str | None = None


class JobRunInput(CamelModel):
    """The `JobRun` workflow's start (and continue-as-new) input: compact by design."""

    job_id: str
    cursor: int = Field(default=0, ge=0, description="the first item index not yet claimed")
    run: int = Field(default=1, ge=1, description="this run's number in the job's chain")
    resume_reason: str | None = None


class CancelJob(CamelModel):
    """The `cancel_job` signal."""

    reason: str | None = Field(default=None, max_length=4096)


class JobEventsInput(CamelModel):
    """`job.record`: events of one job's log, stored in one transaction."""

    events: list[dict[str, Any]]


class ClaimQuery(CamelModel):
    """`job.claim`: up to `limit` pending items from `cursor` on."""

    job_id: str
    cursor: int
    limit: int = Field(ge=1, le=5000)


class ClaimedItem(CamelModel):
    """An item ready to launch: its task's start input (its task created if need be),
    or, when its task has already completed (a resumed job), that task's record."""

    item_id: str
    index: int
    task_id: str
    launch: int
    start: TaskRunInput | None = None
    settled: dict[str, Any] | None = None


class Claim(CamelModel):
    """`job.claim`'s answer: the items, and the cursor after them."""

    items: list[ClaimedItem] = Field(default_factory=list)
    cursor: int


class AdmitInput(CamelModel):
    """`job.admit`: one item's place under the job's rate."""

    rate: JobRate
    tokens: int = Field(ge=0)


def check_job_id(job_id: str, field: str = "jobId") -> str:
    """`job_id` if it is `job-<12 hex>`; otherwise ValueError naming `field`."""
    if not JOB_ID_PATTERN.match(job_id):
        raise ValueError(f"{field}: {job_id!r} is not a job id (job-<12 hex digits>)")
    return job_id


def item_id_of(job_id: str, index: int) -> str:
    """The id of the job's item at `index` (0-based, in the order the items were given)."""
    return f"{job_id}.i{index}"


def item_task_id(job_id: str, index: int) -> str:
    """The id of the task that runs the item: derived, so every claim names the same one."""
    digest = hashlib.sha256(f"{job_id}/{index}".encode()).hexdigest()
    return f"task-{digest[:12]}"


def item_end_event_id(item_id: str, status: str, launch: int) -> str:
    """An item's completion is stored once under its id; a failure once per launch (a
    resumed job may run a failed item again)."""
    return f"{item_id}:completed" if status == "completed" else f"{item_id}:{status}:{launch}"


def item_status_of_task(task_status: str) -> ItemStatus:
    """The item's end from its task's terminal status (a timed out task failed the item)."""
    if task_status == "completed":
        return "completed"
    return "cancelled" if task_status == "cancelled" else "failed"


def progress_line(job: JobRecord) -> str:
    """One line a person reads: status, done of total, and where the rest stand."""
    c = job.counts
    line = (
        f"{job.job_id} {job.status}: {c.done}/{c.total} done "
        f"({c.completed} completed, {c.failed} failed, {c.cancelled} cancelled), "
        f"{c.running} running, {c.pending} pending"
    )
    return f"{line} — {job.reason}" if job.reason and job.terminal else line
