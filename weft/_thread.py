"""`weft.Thread`: a handle on one agent thread (a running `AgentThread` workflow)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from temporalio.client import Client

from weft._config import DEFAULT_TASK_QUEUE
from weft.activities.thread_deletion import DeletionReport
from weft.client.actions import response
from weft.client.audit_trail import PYTHON_SUBJECT
from weft.client.bundles import BundleRef, import_bundle
from weft.client.starts import CONFIRM_TIMEOUT, start_confirmed
from weft.client.threads import Threads, tail_events
from weft.contract.actions import RespondActionResult
from weft.contract.budget import Budget, BudgetLimitName, BudgetState
from weft.contract.definitions_version import UpgradeResult
from weft.contract.effects import ScheduleEffectResult
from weft.contract.events import Event
from weft.contract.inventory import ExecutionEnvironment, ToolInventory
from weft.contract.messages import InterruptTurnResult
from weft.contract.subagent_summary import SubagentJobSummary
from weft.contract.thread import ThreadOptions, ThreadRead, ThreadResult
from weft.contract.turns import TurnResult
from weft.store import Store

Policy = Literal["enqueue", "interrupt", "reject"]
Decision = Literal["approve", "deny", "answer"]


class Thread:
    """One agent thread: `await Thread.start(client, agent)`, or `Thread(client, id)` to
    attach to a thread that exists.

    A thread never completes by itself: it waits for the next message until `terminate`.
    `store` (e.g. `worker.store`, or `weft.Store.open(url)` in another process) is needed
    by `events()`; with it, a message over 64 KiB is sent as a blob instead of being
    refused, and every control action (start, send, ask, respond, interrupt, budget,
    upgrade, terminate, delete, …) is recorded in the store's audit log as done by `python`
    (docs/tenants.md#audit). `client` must come from `weft.connect` (weft's data converter).
    """

    def __init__(
        self,
        client: Client,
        thread_id: str,
        *,
        store: Store | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
    ) -> None:
        self.id = thread_id
        self.client = client
        self.store = store
        self._threads = _threads(client, task_queue, store)
        self._queue = task_queue

    @classmethod
    async def start(
        cls,
        client: Client,
        agent: str,
        *,
        messages: Sequence[str | dict[str, Any]] = (),
        thread_id: str | None = None,
        env: Mapping[str, Any] | None = None,
        session_id: str | None = None,
        user_id: str | None = None,
        options: ThreadOptions | Mapping[str, Any] | None = None,
        task_queue: str = DEFAULT_TASK_QUEUE,
        store: Store | None = None,
        accept_timeout: float = CONFIRM_TIMEOUT,
        tenant: str | None = None,
    ) -> Thread:
        """Start a thread of `agent` (its workflow id is the thread id; None generates a
        readable one, `<agent>-<12 hex>`).

        It returns once a worker has accepted the thread; a worker that does not define
        `agent` (or misses a required variable) refuses it, and `weft.ThreadStartRefused`
        says why, naming the worker's agents and task queue. With no worker answering
        within `accept_timeout` seconds (0: do not wait) the thread is returned anyway: a
        worker that polls `task_queue` later runs it.

        `messages` (str: a user message) are queued at once; often there are none and the
        first turn is an `ask`. `env` values are secrets unless given as
        `{"value": ..., "type": "text"}`. `options` are the thread's runtime options, e.g.
        `{"maxTotalSteps": 64}`: the hard cap of steps per session (default 64), where a
        model call together with the tool calls it asked for is one step.
        `task_queue` must be the worker's (`worker.task_queue`; default `agents`, that of
        `weft.Worker` without a config, while the CLI's `temporal-dev.yml` uses `weft-dev`).
        `tenant` is the tenant the thread (and its subagents) belong to (None: `default`;
        docs/tenants.md).
        """
        fields: dict[str, Any] = {"env": dict(env or {})}
        if session_id is not None:
            fields["session_id"] = session_id
        if user_id is not None:
            fields["user_id"] = user_id
        if options is not None:
            fields["options"] = options
        if tenant is not None:
            fields["tenant"] = tenant
        threads = _threads(client, task_queue, store)
        started = await start_confirmed(
            threads,
            agent,
            messages=messages,
            thread_id=thread_id,
            timeout=accept_timeout,
            **fields,
        )
        return cls(client, started.thread_id, store=store, task_queue=task_queue)

    async def ask(
        self,
        text: str,
        *,
        policy: Policy = "enqueue",
        update_id: str | None = None,
        timeout: float | None = None,
    ) -> TurnResult:
        """Send `text` as a user turn and wait until that turn ends (no polling).

        The answer is `result.response`; `result.status` is `completed`, `failed` (see
        `result.error`), `refused` or `aborted`, and `result.stop_reason` says which rule
        ended the turn. `result.events_cursor` is where the turn's events end (pass it to
        `events(after=...)`). The wait survives worker restarts; a call that is cut
        re-attaches by `update_id`, and asking again with the same `update_id` returns the
        same result without sending the text twice. `timeout` (s; None waits for ever)
        raises `TurnWaitTimeout`, carrying the update id. `policy="interrupt"` cancels the
        model call in flight; `"reject"` refuses the turn when the thread is busy. A
        thread whose workflow failed (its worker refused it: an unknown agent) raises
        `weft.ThreadFailed` with the worker's reason.
        """
        return await self._threads.ask(
            self.id, text, policy=policy, update_id=update_id, timeout=timeout
        )

    async def send(
        self, text: str, *, role: Literal["user", "assistant", "system"] = "user"
    ) -> None:
        """Queue a message and return at once (`queue_message`): a busy thread reads it
        before its next model call, an idle one starts a turn."""
        await self._threads.send(self.id, text, role=role)

    async def events(
        self, after: int | str | None = None, *, follow: bool = True
    ) -> AsyncIterator[Event]:
        """The thread's events, from the store, after a cursor; then, with `follow`, the new
        ones as they are written (the model's text streams as `model.delta` events).

        `after` is an event sequence number, or an event id such as
        `TurnResult.events_cursor`; None starts at the beginning. With `follow` the
        iterator never ends by itself: break out of the loop (for example on
        `turn.completed`). Needs the `store` the worker writes to.
        """
        if self.store is None:
            raise ValueError(
                "Thread.events reads the store the worker writes to: pass store= "
                "(worker.store, or weft.Store.open(url)) to Thread.start or Thread(...)"
            )
        async for event in tail_events(self.store, self.id, after=after or 0, follow=follow):
            yield event

    async def respond(
        self,
        action_id: str,
        decision: Decision,
        *,
        answer: Any = None,
        scope: Literal["once", "session"] = "once",
        reason: str | None = None,
    ) -> RespondActionResult:
        """Answer a pending human action (`read().pending_actions`): `approve` or `deny` a
        tool permission (`scope="session"` approves the tool for the session), `answer`
        an `ask_human` question, or `answer` an MCP server's `elicitation` with an object
        that fits its `args["requestedSchema"]` (`deny` declines it). An unknown or
        resolved action id, or an elicitation answer that does not fit (naming the field),
        raises `temporalio.client.WorkflowUpdateFailedError` saying what is wrong."""
        checked = response(action_id, decision, answer=answer, scope=scope, reason=reason)
        return await self._threads.respond(self.id, checked)

    async def schedule_effect(
        self,
        name: str,
        args: dict[str, Any] | None = None,
        *,
        delay_ms: int = 0,
        effect_id: str | None = None,
    ) -> ScheduleEffectResult:
        """Schedule the effect `name` (`effects/NAME.py`) to run in `delay_ms` ms; its id
        and due time. A durable timer in the thread's workflow: it survives restarts and
        continue-as-new (docs/effects.md). `effect_id` makes the call idempotent. An
        unknown effect raises `temporalio.client.WorkflowUpdateFailedError` naming it."""
        return await self._threads.schedule_effect(
            self.id, name, args, delay_ms=delay_ms, effect_id=effect_id
        )

    async def remove_effect(self, effect_id: str) -> bool:
        """Cancel a pending effect and its timer; False when none is pending by that id."""
        return await self._threads.remove_effect(self.id, effect_id)

    async def effects(self) -> list[dict[str, Any]]:
        """The pending effects, soonest first: `{id, name, args, scheduledAt, createdAt,
        scheduledBy, due}` each."""
        return await self._threads.effects(self.id)

    async def refresh_tools(self, servers: Sequence[str] | None = None) -> None:
        """List the thread's MCP servers' tools again before its next model call (all its
        servers, or those named); each listing is recorded as `tool.catalog.resolved`. A
        name the thread does not define becomes a `runtime.warning` (`unknown_mcp_server`)."""
        await self._threads.refresh_tools(self.id, servers)

    async def read(self) -> ThreadRead:
        """The thread read model: status, queue, pending actions, counters, usage, last
        outcome and stop reason (the `thread_read` query; the worker must be running)."""
        return await self._threads.read(self.id)

    async def tools(self) -> ToolInventory | None:
        """The tool inventory: every tool the active agent, side and prompt can call
        (function, prompt, agent, MCP, built-in), its permission, source and whether an
        `optional` flag disables it. Live, or what the thread stored when it closed (needs
        `store`); None when it is neither."""
        return await self._threads.tool_inventory(self.id)

    async def environment(self) -> ExecutionEnvironment | None:
        """The execution environment: env names (never values), the thread's filesystem,
        limits, and what the thread knows of running code. Live or stored, as `tools()`."""
        return await self._threads.execution_environment(self.id)

    async def subagent_summary(self) -> SubagentJobSummary | None:
        """The `subagent_job_summary`: the child graph, the tasks the graph's threads
        created with each one's attempt thread, and whether each child can still make
        progress (needs `store`; docs/read-models.md)."""
        return await self._threads.subagent_summary(self.id)

    async def interrupt(
        self, *, reason: str | None = None, turn_id: str | None = None
    ) -> InterruptTurnResult:
        """Stop the running turn without a new message; the thread stays open (001's
        `interrupt_turn`). What runs is cancelled (a model or tool call) or ends (a wait on
        a person), the turn ends `interrupted`, and queued messages stay queued: the next
        starts its turn at once. `status` is `noop` when no turn runs, or `turn_id` names
        another turn; `reason` then says which."""
        return await self._threads.interrupt_turn(self.id, reason=reason, turn_id=turn_id)

    async def set_budget(
        self,
        budget: Budget | dict[str, Any] | None = None,
        *,
        clear: Sequence[BudgetLimitName] = (),
        resume: bool = True,
    ) -> BudgetState:
        """New limits for the tree whose root is this thread (docs/budgets.md), e.g.
        `{"maxTokens": 50000}`: limits given replace the current ones, `clear` removes
        caps, and with `resume` a turn the spent budget stopped goes on once there is room.
        A thread that spends from another root's budget refuses, naming that root
        (`temporalio.client.WorkflowUpdateFailedError`)."""
        return await self._threads.set_budget(self.id, budget, clear=clear, resume=resume)

    async def upgrade(self) -> UpgradeResult:
        """Move the thread to the newest definitions its workers serve, between turns
        (docs/deploys.md): `upgraded`, `unchanged`, or `pending` while a turn runs."""
        return await self._threads.upgrade(self.id)

    async def terminate(self, reason: str | None = None) -> None:
        """Soft shutdown: cancels the work in flight, records it, and closes the workflow;
        `result()` waits for that."""
        await self._threads.terminate(self.id, reason)

    async def delete(self, *, children: bool = False) -> DeletionReport:
        """Terminate this thread if it runs and delete everything of it, in Temporal and
        the store (`children`: its subagents too); needs `store` (docs/deletion.md)."""
        return await self._threads.delete(self.id, children=children)

    async def result(self) -> ThreadResult:
        """Wait until the thread has closed (after `terminate`) and return its result."""
        return await self._threads.result(self.id)

    async def fork(self, *, at: str | int, **options: Any) -> Thread:
        """A new thread from this one's state after turn or event `at` (`agent`, `model`,
        `prompt`, `definitions`, `fork_id`: docs/time-travel.md); needs `store`."""
        forked = await self._threads.fork(self.id, at=at, **options)
        return Thread(self.client, forked.thread_id, store=self.store, task_queue=self._queue)

    async def rewind(self, *, at: str | int, reason: str | None = None) -> Thread:
        """Fork after turn `at` and close this thread in the fork's favour; the fork."""
        forked = await self._threads.rewind(self.id, at=at, reason=reason)
        return Thread(self.client, forked.thread_id, store=self.store, task_queue=self._queue)

    async def export(self, path: str | Path) -> BundleRef:
        """Write this thread's bundle to `path` (docs/export-import.md); needs `store`."""
        return await self._threads.export(self.id, path)


def _threads(client: Client, task_queue: str, store: Store | None) -> Threads:
    """The client of a `Thread`: with a store, its control actions are audited as
    `python`; without one there is no audit log to write to."""
    audit_as = PYTHON_SUBJECT if store is not None else None
    return Threads(client, task_queue=task_queue, store=store, audit_as=audit_as)


async def import_thread(store: Store, path: str | Path, *, as_id: str | None = None) -> BundleRef:
    """Import the bundle at `path` into `store` as a closed thread (its id, or `as_id`);
    `Thread(client, ref.thread_id, store=store)` then reads it (docs/export-import.md)."""
    return await import_bundle(store, path, as_id=as_id)
