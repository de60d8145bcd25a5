"""`ScheduledThreadStart`: how an `--agent` schedule starts a thread with a readable id.

A Temporal Schedule names the workflows it starts itself (`NAME-start-<time>`), so each
firing starts this one, which starts the `AgentThread` with an `<agent>-<12 hex>` id drawn
from the workflow's seeded randomness, tagged with the schedule (memo `weftScheduledBy`,
and Temporal's own `TemporalScheduledById`, so one query lists a schedule's threads old and
new). The thread is a child: waiting for it to close is what lets `skip`, `buffer_*`,
`cancel_other` and `terminate_other` act on the thread, as they did when the schedule
started threads itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import (
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
    VersioningBehavior,
)
from temporalio.exceptions import (
    ApplicationError,
    CancelledError,
    ChildWorkflowError,
    TerminatedError,
)

from weft.contract.scheduled_threads import (
    RUN_MEMO,
    SCHEDULED_THREAD_TYPE,
    THREAD_MEMO,
    ScheduledThreadInput,
)
from weft.contract.thread import WORKFLOW_TYPE
from weft.contract.thread_ids import thread_id
from weft.contract.validation import describe_validation_error
from weft.workflows.failures import failure_text

# Error types a failed run carries (visible in the Temporal UI and `weft schedule show`).
INVALID_SCHEDULED_THREAD = "InvalidScheduledThread"
SCHEDULED_THREAD_FAILED = "ScheduledThreadFailed"

# Set by Temporal on every workflow a schedule starts; copied to the thread, which the
# schedule starts only through this run.
SCHEDULED_BY_ID = SearchAttributeKey.for_keyword("TemporalScheduledById")
SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
TENANT = SearchAttributeKey.for_keyword("WeftTenant")
# Runs from before it started their threads without `WeftTenant` (none named a tenant).
TENANT_PATCH = "scheduled-thread-tenant"


@workflow.defn(name=SCHEDULED_THREAD_TYPE)
class ScheduledThreadStartWorkflow:
    """Start one scheduled thread; returns its id (once it closed, with `wait_for_close`)."""

    @workflow.run
    async def run(self, scheduled: Any = None) -> str:
        return await _start_thread(scheduled)


# A run that waits stays open as long as its thread (days, months): pinned to the build it
# started on, as a versioned worker pins every workflow, it would need that build's workers
# to finish, and block its schedule for ever once they are stopped. After the start it only
# waits, so it may move to the current build. A separate class because a workflow that
# declares a behaviour has every task refused by an unversioned worker.
@workflow.defn(name=SCHEDULED_THREAD_TYPE, versioning_behavior=VersioningBehavior.AUTO_UPGRADE)
class VersionedScheduledThreadStartWorkflow:
    """`ScheduledThreadStart` for versioned workers: moves to the current build."""

    @workflow.run
    async def run(self, scheduled: Any = None) -> str:
        return await _start_thread(scheduled)


def scheduled_thread_workflow(*, versioned: bool) -> type:
    """The `ScheduledThreadStart` class a worker registers."""
    return VersionedScheduledThreadStartWorkflow if versioned else ScheduledThreadStartWorkflow


async def _start_thread(scheduled: Any) -> str:
    """Start the thread `scheduled` asks for; wait for it to close when asked to."""
    try:
        valid = ScheduledThreadInput.model_validate(scheduled)
    except ValidationError as err:
        # Validated here, not by the converter: a decode failure there would fail the
        # workflow task forever, and under a waiting overlap policy block every later run.
        raise ApplicationError(
            f"invalid ScheduledThreadStart input: {describe_validation_error(err)}",
            type=INVALID_SCHEDULED_THREAD,
            non_retryable=True,
        ) from None
    start = valid.start
    new_id = thread_id(start.agent, workflow.uuid4().hex)
    # Recorded before the thread starts, so `weft schedule show` can name it at once.
    workflow.upsert_memo({THREAD_MEMO: new_id})
    handle = await workflow.start_child_workflow(
        WORKFLOW_TYPE,
        start.model_dump(mode="json", by_alias=True, exclude_none=True),
        id=new_id,
        task_queue=workflow.info().task_queue,
        # A run that ends at once must leave its thread running; a run that waits shares
        # its thread's fate, so `terminate_other` (which terminates the run) ends it too.
        parent_close_policy=(
            workflow.ParentClosePolicy.TERMINATE
            if valid.wait_for_close
            else workflow.ParentClosePolicy.ABANDON
        ),
        memo={RUN_MEMO: valid.schedule},
        search_attributes=_schedule_attributes(valid.schedule, start.tenant),
        static_summary=f"weft schedule {valid.schedule}: a new {start.agent} thread",
    )
    if valid.wait_for_close:
        # Cancelling this run (`cancel_other`) cancels the awaited thread as well.
        await _closed(handle, valid.schedule)
    return new_id


async def _closed(handle: workflow.ChildWorkflowHandle[Any, Any], schedule: str) -> None:
    """Wait for the thread to close; its failure is this run's, so `pause_on_failure`
    still sees it. A thread terminated or cancelled by hand ends this run quietly."""
    try:
        await handle
    except ChildWorkflowError as err:
        if isinstance(err.cause, TerminatedError | CancelledError):
            return
        raise ApplicationError(
            f"thread {handle.id!r} of schedule {schedule!r} failed:"
            f" {failure_text(err.cause or err)}",
            type=SCHEDULED_THREAD_FAILED,
            non_retryable=True,
        ) from None


def _schedule_attributes(schedule: str, tenant: str | None) -> TypedSearchAttributes:
    """The schedule's attributes from this run (`schedule` when started by hand), and the
    thread's tenant, searchable from its start as any thread's (docs/tenants.md)."""
    own = workflow.info().typed_search_attributes
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(SCHEDULED_BY_ID, own.get(SCHEDULED_BY_ID) or schedule)
    ]
    # Asked in the run's first task, before its only command but the memo: never mid-run.
    if tenant is not None and workflow.patched(TENANT_PATCH):
        pairs.append(SearchAttributePair(TENANT, tenant))
    scheduled_at = own.get(SCHEDULED_START_TIME)
    if scheduled_at is not None:
        pairs.append(SearchAttributePair(SCHEDULED_START_TIME, scheduled_at))
    return TypedSearchAttributes(pairs)
