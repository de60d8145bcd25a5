"""Starting a new thread: the `thread.init` activity snapshots its definitions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.activities import ACTIVITY_THREAD_INIT, ThreadInitInput, ThreadInitResult
from weft.contract.budget import BudgetState
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.thread import ThreadStatus
from weft.workflows import search_attributes, ui_summaries
from weft.workflows.failures import failure_text
from weft.workflows.views import Facts, Identity


class InitView(Facts, Identity, Protocol):
    """What a new thread's first run reads, and what it sets: the snapshot, the budget,
    or why it could not start."""

    snapshot: DefinitionSnapshot | None
    budget: BudgetState | None
    start_failure: str | None

    def use_definitions(self, snapshot: DefinitionSnapshot) -> None: ...

    @property
    def parent_id(self) -> str | None: ...

    @property
    def truthful_log(self) -> bool: ...

    def take_outbox(self) -> list[Event]: ...


async def init_thread(mem: InitView, set_status: Callable[[ThreadStatus], None]) -> None:
    """A new thread's first run: its session, search attributes and definitions snapshot;
    `waiting_input` once it can take turns, `failed` (and the run fails) when it cannot."""
    if mem.truthful_log and mem.parent_id is None:  # a tree is one session: its root's
        mem.emit("session.created", {"agent": mem.start.agent, "rootThreadId": mem.thread_id})
    # The caller's session only: a derived one would change this command for old runs.
    search_attributes.upsert_initial(mem.start.agent, mem.parent_id, mem.start.session_id)
    try:
        mem.use_definitions(await take_snapshot(mem))
    except ApplicationError as err:
        set_status("failed")
        if mem.truthful_log:
            # Turns submitted meanwhile fail with the reason, before the run does: an
            # update left waiting would only learn that the workflow completed.
            mem.start_failure = err.message
            await workflow.wait_condition(workflow.all_handlers_finished)
        raise
    set_status("waiting_input")


async def take_snapshot(mem: InitView) -> DefinitionSnapshot:
    """Record the thread and snapshot its definitions; `ApplicationError` when it cannot run.

    The error carries the cause on top (unknown agent, store down past retries), rather
    than an opaque activity error.
    """
    start = mem.start
    try:
        result: ThreadInitResult = await workflow.execute_activity(
            ACTIVITY_THREAD_INIT,
            ThreadInitInput(
                thread_id=mem.thread_id,
                agent=start.agent,
                session_id=mem.session_id,
                user_id=start.user_id,
                parent_thread_id=mem.parent_id,
                env=start.env,
                scoped_env_request=start.scoped_env_request,
                outbox=mem.take_outbox(),
                parent=start.parent,
                budget=start.options.budget,
                budget_root=start.budget_root,
                tenant=start.tenant,
            ),
            result_type=ThreadInitResult,
            start_to_close_timeout=timedelta(seconds=30),
            # The worker heartbeats every activity: a dead one is noticed this soon, not in 30 s.
            heartbeat_timeout=timedelta(seconds=start.options.heartbeat_timeout_seconds),
            retry_policy=RetryPolicy(
                maximum_attempts=10, non_retryable_error_types=["UnknownAgent"]
            ),
            summary=ui_summaries.thread_init(start.agent),
        )
    except ActivityError as err:
        raise ApplicationError(
            f"thread {mem.thread_id} could not start: {failure_text(err)}",
            type="ThreadInitFailed",
            non_retryable=True,
        ) from err
    if result.budget is not None:
        mem.budget = result.budget
    return result.snapshot
