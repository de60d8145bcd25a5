"""`thread.init`, `definitions.refresh` and `store.flush`: what the workflow records about itself.

`thread.init` freezes the agent's definitions when the thread starts, and records their
version; `definitions.refresh` offers a thread this worker's newer version of them at a
turn boundary; `store.flush` writes the events and messages the workflow produced on its
own when it goes idle.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from weft.activities.clock import now_iso
from weft.activities.hooks import HookRegistry
from weft.activities.hooks.thread_hooks import thread_created
from weft.activities.served_definitions import ServedDefinitions
from weft.activities.snapshots import SnapshotCache
from weft.activities.spill import resolve_content_refs
from weft.contract.activities import (
    ACTIVITY_STORE_FLUSH,
    ACTIVITY_THREAD_INIT,
    FlushInput,
    ThreadInitInput,
    ThreadInitResult,
)
from weft.contract.budget import Budget, BudgetState
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.definitions_version import (
    ACTIVITY_DEFINITIONS_REFRESH,
    DefinitionsRefreshInput,
    DefinitionsRefreshResult,
)
from weft.contract.events import Event
from weft.contract.tenants import DEFAULT_TENANT
from weft.definitions import DefinitionError, Definitions
from weft.definitions.variables import MissingVariable, thread_env
from weft.store import Store, ThreadRow
from weft.store.variable_requests import BootstrapError, VariableValue

# The worker's console gets one line per refused thread (the SDK's own failure log, with
# its traceback, is debug-level for a BENIGN error).
logger = logging.getLogger("weft.worker")


class ThreadRecordActivities:
    """Snapshotting at start, and flushing the workflow's own facts."""

    def __init__(
        self,
        store: Store,
        definitions: Definitions,
        snapshots: SnapshotCache,
        *,
        hooks: HookRegistry | None = None,
    ) -> None:
        self._store = store
        self._definitions = definitions
        self._snapshots = snapshots
        self._hooks = hooks or HookRegistry(store)
        # Shared with `model.call`, which checks a session's version on its first call.
        self.served = ServedDefinitions(store, definitions, snapshots)

    @activity.defn(name=ACTIVITY_THREAD_INIT)
    async def init_thread(self, start: ThreadInitInput) -> ThreadInitResult:
        """Snapshot the agent's definitions and record the thread row and its first events."""
        try:
            snapshot, digest = self.served.version_of(start.agent)
        except DefinitionError as err:
            raise _unknown_agent(start, err) from None
        budget = await asyncio.to_thread(self._init, start, snapshot, digest)
        self._snapshots.remember(snapshot)
        await thread_created(
            self._hooks,
            self._store,
            self._snapshots,
            snapshot,
            start,
            attempt=activity.info().attempt,
        )
        return ThreadInitResult(snapshot=snapshot, budget=budget)

    @activity.defn(name=ACTIVITY_DEFINITIONS_REFRESH)
    async def refresh_definitions(
        self, thread: DefinitionsRefreshInput
    ) -> DefinitionsRefreshResult:
        """This worker's version of the thread's agent when it differs from the thread's,
        stored first (so any worker can run the thread's turns with it), with what changed."""
        return await self.served.check(thread)

    def _init(
        self, start: ThreadInitInput, snapshot: DefinitionSnapshot, digest: str
    ) -> BudgetState | None:
        self.served.record(snapshot, digest)
        existing = self._store.threads.get(start.thread_id)
        if existing is not None and existing.tenant != (start.tenant or DEFAULT_TENANT):
            raise _id_taken(start)  # another tenant's thread: its rows are not this one's
        if existing is None:
            if self._store.tasks.get(start.thread_id) or self._store.jobs.get(start.thread_id):
                raise _id_taken(start)  # a task's or job's log is kept under its id
            self._store.threads.upsert(
                ThreadRow(
                    thread_id=start.thread_id,
                    agent=start.agent,
                    status="running",
                    session_id=start.session_id,
                    user_id=start.user_id,
                    parent_thread_id=start.parent_thread_id,
                    created_at=datetime.now(UTC),
                    env=self._env(start, snapshot),
                    tenant=start.tenant or DEFAULT_TENANT,
                )
            )
        if start.budget_root is None or start.budget_root == start.thread_id:
            return self._open_budget(start, snapshot)
        if start.outbox:
            self._store.events.append(start.outbox)
        return None

    def _open_budget(
        self, start: ThreadInitInput, snapshot: DefinitionSnapshot
    ) -> BudgetState | None:
        """A root opens its tree's ledger, even without limits, so that spend counts from
        the start should set_budget add some later; it is written with the first events.

        The limits are options.budget made stricter by the agent's own `budget:`. A
        subagent spends from its root's ledger only: its own limits do not apply.
        """
        limits = (start.budget or Budget()).stricter(snapshot.agent.budget)
        events = list(start.outbox)
        if not limits.is_empty():
            events.append(
                Event(
                    type="limit.changed",
                    event_id=f"{start.thread_id}:budget.opened",
                    timestamp=now_iso(),
                    thread_id=start.thread_id,
                    session_id=start.session_id,
                    payload={
                        "rootThreadId": start.thread_id,
                        "reason": "opened",
                        "limits": limits.model_dump(mode="json", by_alias=True, exclude_none=True),
                    },
                )
            )
        state = self._store.budgets.open(
            start.thread_id, limits, now=datetime.now(UTC), events=events
        )
        return None if state.limits.is_empty() else state

    def _env(self, start: ThreadInitInput, snapshot: DefinitionSnapshot) -> dict[str, Any]:
        """The thread's env (scoped values too), typed as declared; a required variable
        that resolves nowhere stops the thread here, naming the file that declares it."""
        env = {**start.env, **self._scoped_env(start)}
        try:
            return thread_env(self._definitions, snapshot, env)
        except MissingVariable as err:
            raise ApplicationError(
                f"thread {start.thread_id}: {err}", type="MissingVariable", non_retryable=True
            ) from None

    def _scoped_env(self, start: ThreadInitInput) -> dict[str, dict[str, VariableValue]]:
        """The §7.5 request's values as secret env: runtime-only, never model-visible."""
        if start.scoped_env_request is None:
            return {}
        try:
            values = self._store.variable_requests.provided_values(start.scoped_env_request)
        except BootstrapError as err:
            raise ApplicationError(
                f"thread {start.thread_id}: {err}", type="ScopedEnvUnavailable", non_retryable=True
            ) from None
        return {name: {"value": value, "type": "secret"} for name, value in values.items()}

    @activity.defn(name=ACTIVITY_STORE_FLUSH)
    async def flush(self, batch: FlushInput) -> None:
        """Write the workflow's pending messages, events and read-model row."""
        await asyncio.to_thread(self._flush, batch)

    def _flush(self, batch: FlushInput) -> None:
        # No message hooks here: these messages are the workflow's own (agent tool results,
        # denials, messages re-flushed after a failed step), already indexed and acted on,
        # so a hook could not refuse them; and this local activity must stay quick and
        # idempotent, running no user code (docs/hooks.md).
        # Queued messages written ahead of a step may be previews of spilled content.
        self._store.events.record(*resolve_content_refs(self._store, batch.messages, batch.events))
        if batch.thread_row is not None:
            current = self._store.threads.get(batch.thread_id)
            if current is not None:
                changes = {k: v for k, v in batch.thread_row.items() if k in ThreadRow.model_fields}
                changes["updated_at"] = datetime.now(UTC)
                self._store.threads.upsert(current.model_copy(update=changes))


def _id_taken(start: ThreadInitInput) -> ApplicationError:
    """The refusal of a thread whose id names what it may not join: another tenant's
    thread, or a task's or job's log. Worded the same for each, so that the refusal does
    not tell a caller whether another tenant's thread exists."""
    return ApplicationError(
        f"thread id {start.thread_id!r} is taken: start the thread under another id",
        type="ThreadIdTaken",
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    )


def _unknown_agent(start: ThreadInitInput, err: DefinitionError) -> ApplicationError:
    """The refusal of a thread whose agent this worker does not define: it names the agent,
    the worker's agents and its task queue, since a thread started on the queue of another
    worker set (the README program beside `weft dev`) is the usual cause."""
    queue = activity.info().task_queue
    reason = (
        f"{err} (worker on task queue {queue!r}; start the thread on the task queue of a "
        f"worker that defines {start.agent!r})"
    )
    logger.warning("weft worker: thread %s refused: %s", start.thread_id, reason)
    # BENIGN: the caller's mistake, not the worker's; the SDK then logs it without a traceback.
    return ApplicationError(
        reason,
        type="UnknownAgent",
        non_retryable=True,
        category=ApplicationErrorCategory.BENIGN,
    )
