"""A Python client for weft threads: start, send, update, query, compact, refresh MCP
tools, terminate and tail.

Everything here is plain Temporal: the same names and JSON any other service can send.
Events are tailed from the store by cursor, because workflows cannot stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from weft.activities.spill import SPILL_THRESHOLD_BYTES, may_spill, spill_queued_content
from weft.activities.thread_deletion import DeletionReport, delete_thread
from weft.client import actions, inventory
from weft.client import audit_trail as audit
from weft.client.ask import Policy, ask_thread
from weft.client.audit_trail import PYTHON_SUBJECT, AuditTrail, ControlAction, Outcome
from weft.client.bundles import BundleRef, export_thread, import_bundle
from weft.client.context import context_snapshot
from weft.client.forks import Forks
from weft.client.lineage import with_lineage
from weft.client.subagent_summary import subagent_summary
from weft.client.thread_ids import new_thread_id
from weft.contract.actions import ActionResponse, RespondActionResult
from weft.contract.budget import (
    UPDATE_SET_BUDGET,
    Budget,
    BudgetLimitName,
    BudgetState,
    SetBudget,
)
from weft.contract.context import SIGNAL_COMPACT, CompactRequest
from weft.contract.correlation import default_session_id
from weft.contract.definitions_version import UPDATE_UPGRADE_DEFINITIONS, UpgradeResult
from weft.contract.effects import (
    UPDATE_REMOVE_EFFECT_CHECKED,
    UPDATE_SCHEDULE_EFFECT_CHECKED,
    RemoveEffectResult,
    ScheduleEffectRequest,
    ScheduleEffectResult,
)
from weft.contract.events import Event
from weft.contract.forks import ForkResult
from weft.contract.inventory import ExecutionEnvironment, ToolInventory
from weft.contract.mcp import SIGNAL_REFRESH_TOOLS, RefreshTools
from weft.contract.messages import (
    MAX_QUEUED_CONTENT_CHARS,
    InterruptTurnRequest,
    InterruptTurnResult,
    MessagePage,
    QueuedMessage,
    SubmitTurnResult,
)
from weft.contract.subagent_summary import SubagentJobSummary
from weft.contract.tenants import DEFAULT_TENANT, check_tenant
from weft.contract.thread import (
    QUERY_MESSAGES,
    QUERY_THREAD_READ,
    SIGNAL_QUEUE_MESSAGE,
    SIGNAL_QUEUE_TOOL,
    SIGNAL_TERMINATE,
    UPDATE_INTERRUPT_TURN,
    UPDATE_SUBMIT_TURN,
    WORKFLOW_TYPE,
    ThreadRead,
    ThreadResult,
    ThreadStartInput,
)
from weft.contract.turns import TurnResult
from weft.contract.ui_text import secret_values, thread_summary
from weft.store import Store
from weft.store.event_signal import Feed, shared_feed
from weft.workflows.search_attributes import start_attributes


class Threads:
    """Operations on AgentThread workflows through a Temporal client.

    With a `store`, a message over `SPILL_THRESHOLD_BYTES` (64 KiB of UTF-8) is uploaded
    as a blob and queued as a preview carrying `metadata.contentRef`; the model activity
    stores the full text and the model reads it. Temporal history then holds only the
    preview. Without a store, content is limited to `MAX_QUEUED_CONTENT_CHARS`.

    `audit_as` (with a store) records each control action in the store's audit log as
    done by that subject (`python`, `cli:<user>`), with the tenant of the thread acted on
    (client/audit_trail.py). None records nothing: the HTTP API records its requests
    itself. A deletion is always recorded (`python` unless `audit_as` says who).
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = "agents",
        store: Store | None = None,
        audit_as: str | None = None,
    ) -> None:
        self._client = client
        self._task_queue = task_queue
        self._store = store
        if audit_as is not None and store is None:
            raise ValueError("Threads(audit_as=...) needs a store: the audit log is in the store")
        self._trail = (
            None
            if store is None or audit_as is None
            else AuditTrail(store, audit_as, client=client)
        )

    async def start(
        self,
        agent: str,
        *,
        messages: Sequence[str | dict[str, Any]] = (),
        thread_id: str | None = None,
        **fields: Any,
    ) -> WorkflowHandle[Any, Any]:
        """Start a thread of `agent`; string messages are user messages."""
        async with self._acting(audit.START, tenant=_named_tenant(fields)) as outcome:
            queued = [await self._spilled(_as_message(m)) for m in messages]
            start = ThreadStartInput.model_validate({"agent": agent, "messages": queued, **fields})
            thread_id = outcome.thread_id = thread_id or new_thread_id(start.agent)
            if self._store is not None:  # QuotaExceeded when the tenant is at a quota
                await asyncio.to_thread(
                    self._store.tenant_quotas.check_start, start.tenant or DEFAULT_TENANT
                )
            if start.session_id is None:  # the workflow derives the same; here it is searchable
                start.session_id = default_session_id(thread_id)
            return await self._start_workflow(start, thread_id)

    async def _start_workflow(
        self, start: ThreadStartInput, thread_id: str
    ) -> WorkflowHandle[Any, Any]:
        return await self._client.start_workflow(
            WORKFLOW_TYPE,
            start,
            id=thread_id,
            task_queue=self._task_queue,
            # The tenant is searchable from the start (`WeftTenant`); none is `default`.
            search_attributes=start_attributes(start.tenant),
            # What the Temporal UI lists the thread by; secrets in its env are redacted.
            static_summary=thread_summary(start.agent, start.messages, secret_values(start.env)),
        )

    def handle(self, thread_id: str) -> WorkflowHandle[Any, Any]:
        """The workflow handle of a thread."""
        return self._client.get_workflow_handle(thread_id)

    async def send(self, thread_id: str, content: str, *, role: str = "user") -> None:
        """Queue a message with the `queue_message` signal."""
        async with self._acting(audit.SEND, thread_id):
            await self._within_budget_quota(thread_id)
            message = await self._queued(role, content)
            await self.handle(thread_id).signal(SIGNAL_QUEUE_MESSAGE, message)

    async def submit_turn(
        self, thread_id: str, content: str, *, role: str = "user"
    ) -> SubmitTurnResult:
        """Queue a message with the `submit_turn` update; rejected when terminated."""
        async with self._acting(audit.SUBMIT_TURN, thread_id) as outcome:
            await self._within_budget_quota(thread_id)
            message = await self._queued(role, content)
            # Handles by id are untyped: the converter builds the model (`result_type`),
            # and `model_validate` passes that instance through, typed.
            result = SubmitTurnResult.model_validate(
                await self.handle(thread_id).execute_update(
                    UPDATE_SUBMIT_TURN, message, result_type=SubmitTurnResult
                )
            )
            if result.status == "rejected":
                outcome.status = 409  # as over HTTP: the thread refused the turn
            return result

    async def ask(
        self,
        thread_id: str,
        text: str,
        *,
        policy: Policy = "enqueue",
        update_id: str | None = None,
        timeout: float | None = None,
    ) -> TurnResult:
        """Send `text` as a user turn and wait until that turn ends; returns how it ended.

        The answer is `TurnResult.response` (`status` says whether the turn completed,
        failed, was refused or aborted). Waiting survives worker restarts. A cut call
        re-attaches by update id (default: a new one); `ask` again with the same
        `update_id`, from any process, returns the same result without queuing the text
        twice. `timeout` (seconds; None waits for ever) raises `TurnWaitTimeout`, which
        carries the update id. A thread that refuses the update (terminated) raises
        `temporalio.client.WorkflowUpdateFailedError`; one whose workflow failed (its
        worker refused the thread) raises `ThreadFailed` with the reason.
        """
        async with self._acting(audit.ASK, thread_id) as outcome:
            await self._within_budget_quota(thread_id)
            message = await self._queued("user", text)
            result = await ask_thread(
                self._client,
                thread_id,
                message,
                policy=policy,
                update_id=update_id,
                timeout=timeout,
                store=self._store,
            )
            if result.status == "refused":
                outcome.status = 409  # as over HTTP: the thread refused the turn
            return result

    async def queue_tool(self, thread_id: str, name: str, args: dict[str, Any]) -> None:
        """Run a tool through the thread's normal tool flow."""
        async with self._acting(audit.QUEUE_TOOL, thread_id):
            await self.handle(thread_id).signal(SIGNAL_QUEUE_TOOL, {"name": name, "args": args})

    async def terminate(self, thread_id: str, reason: str | None = None) -> None:
        """Soft shutdown of the thread (Runtime §10)."""
        async with self._acting(audit.TERMINATE, thread_id):
            await self.handle(thread_id).signal(SIGNAL_TERMINATE, {"reason": reason})

    async def respond(self, thread_id: str, answer: ActionResponse) -> RespondActionResult:
        """Answer a pending action (`actions.response(...)` builds `answer`) by the checked
        update: raises WorkflowUpdateFailedError saying what is wrong."""
        async with self._acting(audit.RESPOND, thread_id, action_id=answer.action_id):
            return await actions.respond_checked(self._client, thread_id, answer)

    async def interrupt_turn(
        self, thread_id: str, *, reason: str | None = None, turn_id: str | None = None
    ) -> InterruptTurnResult:
        """Stop the running turn (001's `interrupt_turn`); the thread stays open.

        `accepted`: the turn is stopping (it ends `interrupted`, the thread goes idle, queued
        messages stay queued). `noop`: no turn runs, or `turn_id` is not the running one.
        """
        async with self._acting(audit.INTERRUPT, thread_id):
            request = InterruptTurnRequest(reason=reason, turn_id=turn_id)
            result = await self.handle(thread_id).execute_update(
                UPDATE_INTERRUPT_TURN,
                request.model_dump(mode="json", by_alias=True, exclude_none=True),
                result_type=InterruptTurnResult,
            )
            return InterruptTurnResult.model_validate(result)

    async def upgrade(self, thread_id: str) -> UpgradeResult:
        """Move the thread to the newest definitions its workers serve (a `pinned` agent's
        threads move only so). `upgraded`: done, with the old and new digests and what
        changed; `unchanged`: already on them; `pending`: a turn is running, and the move
        happens before the next one."""
        async with self._acting(audit.UPGRADE, thread_id):
            result = await self.handle(thread_id).execute_update(
                UPDATE_UPGRADE_DEFINITIONS, result_type=UpgradeResult
            )
            return UpgradeResult.model_validate(result)

    async def compact(self, thread_id: str, reason: str | None = None) -> None:
        """Ask the thread to compact its model context (the `compact` signal).

        The workflow decides when it compacts; `context` shows the boundary once written.
        Without a reason the signal carries no payload, which the workflow accepts; a reason
        is validated here, so one the workflow would refuse fails the caller instead.
        """
        async with self._acting(audit.COMPACT, thread_id):
            handle = self.handle(thread_id)
            if reason is None:
                await handle.signal(SIGNAL_COMPACT)
            else:
                await handle.signal(SIGNAL_COMPACT, CompactRequest(reason=reason))

    async def refresh_tools(self, thread_id: str, servers: Sequence[str] | None = None) -> None:
        """Ask the thread to list its MCP servers' tools again (the `refresh_tools` signal).

        `servers` names the servers to list (default: every server the thread's snapshot
        defines). The thread lists them before its next model call and records
        `tool.catalog.resolved`; a server it does not define is a `runtime.warning`
        (`unknown_mcp_server`). The payload is validated here, as `compact` does.
        """
        if isinstance(servers, str):  # a lone name would be listed letter by letter
            raise TypeError(f"servers must be a list of names, not the string {servers!r}")
        async with self._acting(audit.REFRESH_TOOLS, thread_id):
            request = RefreshTools(servers=None if servers is None else list(servers))
            await self.handle(thread_id).signal(SIGNAL_REFRESH_TOOLS, request)

    async def context(self, thread_id: str) -> dict[str, Any] | None:
        """The `context_boundary_snapshot`: live, or from the store once the thread is closed.

        None when the thread cannot answer and the store does not know it. Without a store,
        a thread that cannot answer the query raises `ValueError`.
        """
        return await context_snapshot(self._client, self._store, thread_id)

    async def tool_inventory(self, thread_id: str) -> ToolInventory | None:
        """The `tool_inventory_snapshot`: live, or from the store once the thread is closed.

        None when the thread cannot answer and never stored one. Without a store, a thread
        that cannot answer the query raises `ValueError`.
        """
        return await inventory.tool_inventory(self._client, self._store, thread_id)

    async def execution_environment(self, thread_id: str) -> ExecutionEnvironment | None:
        """The `execution_environment_snapshot` (env names, never values): live, or from the
        store once the thread is closed; None and `ValueError` as for `tool_inventory`."""
        return await inventory.execution_environment(self._client, self._store, thread_id)

    async def subagent_summary(self, thread_id: str) -> SubagentJobSummary | None:
        """The `subagent_job_summary` (child graph, tasks, assigned threads,
        recoverability), read from the store, with Temporal's status of each open child.
        None for a thread the store does not know; `ValueError` without a store."""
        return await subagent_summary(self._client, self._store, thread_id)

    async def export(self, thread_id: str, path: str | Path) -> BundleRef:
        """Write the thread's bundle to `path` (001's `export_replay`; docs/export-import.md)
        and record `evidence.changed` with its ref; needs a store."""
        return await export_thread(
            self._client,
            self._with_store("export"),
            thread_id,
            path,
            namespace=self._client.namespace,
        )

    async def import_bundle(self, path: str | Path, *, as_id: str | None = None) -> BundleRef:
        """Bring a bundle into this client's store as a closed thread (its id, or `as_id`)."""
        store = self._with_store("import_bundle")
        async with self._acting(audit.IMPORT) as outcome:
            ref = await import_bundle(store, path, as_id=as_id)
            outcome.thread_id = ref.thread_id
        return ref

    async def delete(self, thread_id: str, *, children: bool = False) -> DeletionReport:
        """Terminate the thread if it runs and delete everything of it from Temporal and
        the store (with `children`, its subagents too); needs a store (docs/deletion.md)."""
        store = self._with_store("delete")
        who = PYTHON_SUBJECT if self._trail is None else self._trail.subject
        return await delete_thread(
            self._client, store, thread_id, children=children, audit_subject=who
        )

    def _with_store(self, method: str) -> Store:
        if self._store is None:
            raise ValueError(f"Threads.{method} needs a store: Threads(client, store=...)")
        return self._store

    async def fork(self, thread_id: str, *, at: str | int, **options: Any) -> ForkResult:
        """Start a thread from `thread_id`'s state after a turn or event (`agent`, `model`,
        `prompt`, `definitions`, `fork_id`: docs/time-travel.md); needs a store."""
        async with self._acting(audit.FORK, thread_id):
            return await self._forks("fork").fork(thread_id, at=at, **options)

    async def rewind(self, thread_id: str, *, at: str | int, **options: Any) -> ForkResult:
        """Fork `thread_id` after a turn and close it in the fork's favour; needs a store."""
        async with self._acting(audit.REWIND, thread_id):
            return await self._forks("rewind").rewind(thread_id, at=at, **options)

    def _forks(self, method: str) -> Forks:
        if self._store is None:
            raise ValueError(f"Threads.{method} needs a store: Threads(client, store=...)")
        return Forks(self._client, self._store, task_queue=self._task_queue)

    async def schedule_effect(
        self,
        thread_id: str,
        name: str,
        args: dict[str, Any] | None = None,
        *,
        delay_ms: int = 0,
        effect_id: str | None = None,
    ) -> ScheduleEffectResult:
        """Schedule an effect on the thread (the checked update); `effect_id` makes it
        idempotent. An unknown effect or a bad delay is refused with the reason."""
        async with self._acting(audit.SCHEDULE_EFFECT, thread_id):
            request = ScheduleEffectRequest(
                name=name, args=args or {}, delay_ms=delay_ms, id=effect_id
            )
            result = await self.handle(thread_id).execute_update(
                UPDATE_SCHEDULE_EFFECT_CHECKED,
                request.model_dump(mode="json", by_alias=True, exclude_none=True),
                result_type=ScheduleEffectResult,
            )
            return ScheduleEffectResult.model_validate(result)

    async def remove_effect(self, thread_id: str, effect_id: str) -> bool:
        """Remove a pending effect; False when none is pending by that id."""
        async with self._acting(audit.REMOVE_EFFECT, thread_id, effect_id=effect_id):
            result = await self.handle(thread_id).execute_update(
                UPDATE_REMOVE_EFFECT_CHECKED, {"id": effect_id}, result_type=RemoveEffectResult
            )
            return RemoveEffectResult.model_validate(result).removed

    async def set_budget(
        self,
        thread_id: str,
        budget: Budget | dict[str, Any] | None = None,
        *,
        clear: Sequence[BudgetLimitName] = (),
        resume: bool = True,
    ) -> BudgetState:
        """New limits for the tree whose root is `thread_id` (the checked update).

        Limits given replace the current ones and `clear` removes caps. With `resume`, a
        thread whose last turn stopped because the budget was spent continues it once the
        new limits leave room. A thread that spends from another root's budget refuses,
        naming that root.
        """
        async with self._acting(audit.BUDGET, thread_id):
            request = SetBudget(
                budget=Budget.model_validate(budget or {}), clear=list(clear), resume=resume
            )
            result = await self.handle(thread_id).execute_update(
                UPDATE_SET_BUDGET,
                request.model_dump(mode="json", by_alias=True, exclude_none=True),
                result_type=BudgetState,
            )
            return BudgetState.model_validate(result)

    async def effects(self, thread_id: str) -> list[dict[str, Any]]:
        """The thread's pending effects, soonest first (from `thread_read`)."""
        return (await self.read(thread_id)).scheduled_effects

    async def read(self, thread_id: str) -> ThreadRead:
        """The thread read model (with its fork links when this client has the store)."""
        read = ThreadRead.model_validate(
            await self.handle(thread_id).query(QUERY_THREAD_READ, result_type=ThreadRead)
        )
        if self._store is None:
            return read
        return await asyncio.to_thread(with_lineage, self._store, read)

    async def messages(self, thread_id: str, *, cursor: int = 0, limit: int = 100) -> MessagePage:
        """A page of message metadata."""
        return MessagePage.model_validate(
            await self.handle(thread_id).query(
                QUERY_MESSAGES, {"cursor": cursor, "limit": limit}, result_type=MessagePage
            )
        )

    async def result(self, thread_id: str) -> ThreadResult:
        """Wait for the thread to close and return its result."""
        # `result()` takes no `result_type`: the handle carries it.
        handle = self._client.get_workflow_handle(thread_id, result_type=ThreadResult)
        return ThreadResult.model_validate(await handle.result())

    def _acting(
        self,
        action: ControlAction,
        thread_id: str | None = None,
        *,
        tenant: str | None = None,
        **params: str,
    ) -> AbstractAsyncContextManager[Outcome]:
        """The body as `action`, recorded in the audit log when this client has a trail."""
        if self._trail is None:
            return _unrecorded(action)
        return self._trail.acting(action, thread_id=thread_id, tenant=tenant, **params)

    async def _within_budget_quota(self, thread_id: str) -> None:
        """QuotaExceeded when the thread's tenant has spent its budget (with a store):
        its model call would only refuse the message (docs/tenants.md#quotas)."""
        if self._store is not None:
            await asyncio.to_thread(self._store.tenant_quotas.check_budget_of_thread, thread_id)

    async def _queued(self, role: str, content: str) -> QueuedMessage:
        """The message to signal: large content goes to the store first when there is one."""
        if self._store is None and len(content) > MAX_QUEUED_CONTENT_CHARS:
            raise ValueError(
                f"message content is {len(content)} characters; without a store the limit is "
                f"{MAX_QUEUED_CONTENT_CHARS}. Give Threads a store to send content over "
                f"{SPILL_THRESHOLD_BYTES} bytes as a blob"
            )
        return QueuedMessage.model_validate(await self._spilled({"role": role, "content": content}))

    async def _spilled(self, message: dict[str, Any]) -> dict[str, Any]:
        """`message` with content over the threshold replaced by a preview and a ref."""
        content = message.get("content")
        if self._store is None or not isinstance(content, str) or not may_spill(content):
            return message  # no thread hop for the common short message
        content, ref = await asyncio.to_thread(spill_queued_content, self._store, content)
        return {**message, "content": content, "metadata": {**message.get("metadata", {}), **ref}}


async def tail_events(
    store: Store,
    thread_id: str,
    *,
    after: int | str = 0,
    follow: bool = True,
    poll_interval: float | None = None,
    stop: asyncio.Event | None = None,
) -> AsyncIterator[Event]:
    """Events of a thread from cursor `after`; with `follow`, wait for new ones.

    `after` is a sequence number, or an event id such as `TurnResult.events_cursor`: the
    events after that event. The workflow writes its events in order, so while that event
    is not stored yet none after it is either: `follow` waits for it, otherwise nothing
    is read. Followers wait in the process's feed for the store (`shared_feed`: PostgreSQL
    NOTIFY, SQLite's change signal), which wakes them when their thread has new events;
    `poll_interval`, when given, is the longest wait between two reads of the store.
    """
    if not follow:
        cursor = after if isinstance(after, int) else None
        if cursor is None:
            cursor = await asyncio.to_thread(store.events.sequence_of, thread_id, str(after))
        if cursor is not None:
            for event in await asyncio.to_thread(store.events.read, thread_id, after=cursor):
                yield event
        return
    feed = shared_feed(store)
    wait = _FOLLOW_WAIT if poll_interval is None else poll_interval
    if isinstance(after, int):
        cursor = after
    else:
        found = await _sequence_of(feed, store, thread_id, after, wait, stop)
        if found is None:
            return
        cursor = found
    while True:
        batch = await _until_stopped(feed.wait_for_events(thread_id, cursor, wait), stop)
        if batch is None:  # stopped: what the store holds now, then the end
            batch = await asyncio.to_thread(store.events.read, thread_id, after=cursor)
            if not batch:
                return
        for event in batch:
            cursor = event.sequence or cursor
            yield event


# How long a follower waits in the feed before it reads the store anyway, in seconds.
_FOLLOW_WAIT = 30.0


async def _until_stopped(
    waiting: Coroutine[Any, Any, list[Event]], stop: asyncio.Event | None
) -> list[Event] | None:
    """What `waiting` returns, or None once `stop` is set first."""
    if stop is None:
        return await waiting
    if stop.is_set():
        waiting.close()
        return None
    events = asyncio.ensure_future(waiting)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((events, stopped), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not events.done():
            events.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await events
    return events.result() if not events.cancelled() else None


async def _sequence_of(
    feed: Feed,
    store: Store,
    thread_id: str,
    event_id: str,
    wait: float,
    stop: asyncio.Event | None,
) -> int | None:
    """The sequence of event `event_id`, waiting until it is stored (or `stop` is set)."""
    # The last sequence first: an event stored after this read comes in the batches below.
    cursor = await asyncio.to_thread(store.events.last_sequence, thread_id)
    found = await asyncio.to_thread(store.events.sequence_of, thread_id, event_id)
    while found is None:
        batch = await _until_stopped(feed.wait_for_events(thread_id, cursor, wait), stop)
        if batch is None:
            return await asyncio.to_thread(store.events.sequence_of, thread_id, event_id)
        for event in batch:
            cursor = event.sequence or cursor
            if event.event_id == event_id:
                found = cursor
                break
    return found


@asynccontextmanager
async def _unrecorded(action: ControlAction) -> AsyncIterator[Outcome]:
    yield Outcome(action.done)


def _named_tenant(fields: dict[str, Any]) -> str | None:
    """The tenant a start names (none: `default`), for its audit entry; None when what it
    names is no tenant's name (the start is refused for it)."""
    named = fields.get("tenant") or DEFAULT_TENANT
    try:
        return check_tenant(named) if isinstance(named, str) else None
    except ValueError:
        return None


def _as_message(message: str | dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": message} if isinstance(message, str) else message
