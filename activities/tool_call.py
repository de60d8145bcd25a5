"""The `tool.call` activity: run one function or MCP tool and persist its result message.

A tool's own failure (bad arguments, an exception, an unknown tool) is a result with
status `error`, never an activity failure: Runtime §5.2 says tool errors are persisted
and must not crash the loop. Only infrastructure failures are retried by Temporal.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

from temporalio import activity

from weft.activities.clock import now_iso, now_micros
from weft.activities.env import Env, ToolDispatch
from weft.activities.env_versions import env_version
from weft.activities.hooks import HookRegistry
from weft.activities.hooks.tool_hooks import ToolHooks, refused
from weft.activities.pending_events import PendingEvents
from weft.activities.sandbox import SandboxPool
from weft.activities.snapshots import SnapshotCache
from weft.activities.spans import Spans
from weft.activities.spill import spill_if_large
from weft.activities.streaming import Heartbeater
from weft.activities.tool_invoker import ToolInvoker
from weft.activities.tool_sources import calling_prompt
from weft.activities.tool_state import ThreadState, idempotency_key, thread_state_for
from weft.contract.activities import ACTIVITY_TOOL_CALL, ToolCallInput, ToolCallResult, ToolResult
from weft.contract.definitions import DefinitionSnapshot, PromptDef
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.definitions import Definitions
from weft.store import Store
from weft.store.events import changes_rows
from weft.store.thread_env_rows import ThreadEnvRow


class ToolActivities:
    """Runs each tool call through the worker's Env (activities/env.py) with a ThreadState,
    and stores its result."""

    def __init__(
        self,
        store: Store,
        definitions: Definitions,
        snapshots: SnapshotCache,
        *,
        env: Env,
        sandbox: SandboxPool | None = None,
        hooks: HookRegistry | None = None,
        spans: Spans | None = None,
    ) -> None:
        self._store = store
        self._env = env
        self._definitions = definitions
        self._snapshots = snapshots
        self._sandbox = sandbox
        self._hooks = hooks or HookRegistry(store)
        self._spans = spans or Spans()

    @activity.defn(name=ACTIVITY_TOOL_CALL)
    async def call_tool(self, call: ToolCallInput) -> ToolCallResult:
        """Run `call.tool_call` and store its result under `call.result_message_id`."""
        info = activity.info()
        name = call.tool_call.function.name
        started = self._event(
            call,
            f"started.a{info.attempt}",
            "tool.started",
            {"name": name, "arguments": call.tool_call.function.arguments, "attempt": info.attempt},
        )
        snapshot = await self._snapshots.get(call.snapshot_id)
        events = [*call.outbox, started]
        version = env_version(call.env_writes, info)
        kept = self._store.threads.env_rows.get(call.thread_id, version)
        if kept is not None and not _store_first(call, events):
            # Nothing to read or write before the tool runs: no thread hop.
            state, lead = self._begin(call, snapshot, kept=kept), events
        else:
            state, lead = await asyncio.to_thread(
                self._begin_stored, call, snapshot, events, version, kept
            )
        # A tool that ends within the interval stores its start events with its result,
        # in one write; a slower one has them stored meanwhile (pending_events.py).
        pending = PendingEvents(self._store, lead)
        state.before_write = pending.flush
        hooks = ToolHooks(
            self._hooks,
            snapshot,
            call,
            state,
            make_event=lambda suffix, kind, data: self._event(
                call, f"a{info.attempt}.{suffix}", kind, data
            ),
        )
        async with pending:
            return await self._finish(call, snapshot, state, hooks, pending)

    async def _finish(
        self,
        call: ToolCallInput,
        snapshot: DefinitionSnapshot,
        state: ThreadState,
        hooks: ToolHooks,
        pending: PendingEvents,
    ) -> ToolCallResult:
        """Run the tool, let the hooks see its result, store the result message."""
        name = call.tool_call.function.name
        try:
            # Its first beat after a second: the worker's own beats (workers/recovery.py)
            # cover a quick call, which then costs no heartbeat of its own.
            async with Heartbeater(wait_first=True):
                dispatched = await self._env.tools().dispatch(
                    ToolDispatch(call=call, snapshot=snapshot, state=state)
                )
        except asyncio.CancelledError:
            state.abort.set()  # stop any sandboxed code the tool started
            raise
        result, relisted = dispatched.result, dispatched.mcp
        if not hooks.runner.empty:
            await pending.flush()  # a hook may write for the thread: keep the events' order
        result, blocked = await hooks.result(call.tool_call, result)
        message = _message(call, result)
        if blocked is None:
            message, blocked = await hooks.message(message)
        if blocked is not None:  # stored as an error naming the hook: the pair stays whole
            result = refused(blocked)
            message = _message(call, result)
        outcome = "tool.result" if result.status == "success" else "tool.failed"
        done = self._event(
            call,
            "done",
            outcome,
            {
                "name": name,
                "status": result.status,
                "messageId": message.id,
                "error": result.error,
                "errorCode": result.error_code,
            },
        )
        returned, spilled = spill_if_large(
            message,
            ids={
                "session_id": call.session_id,
                "turn_id": call.turn_id,
                "step_id": call.step_id,
                "tool_call_id": call.tool_call.id,
            },
        )
        owed = await pending.take()
        await asyncio.to_thread(
            self._store.events.record,
            [message],
            [*owed, *hooks.runner.take_events(), done, *filter(None, [spilled])],
            # A late completion (the thread closed, or the call was recorded aborted)
            # writes nothing: fenced in this write's transaction (store/outcome_fence.py).
            unless_closed=True,
        )
        await hooks.created(message)
        return ToolCallResult(
            message=returned, intents=state.intents, blocked=blocked, mcp=relisted
        )

    def _begin(
        self,
        call: ToolCallInput,
        snapshot: DefinitionSnapshot,
        *,
        version: Hashable | None = None,
        kept: ThreadEnvRow | None = None,
    ) -> ThreadState:
        """The tool's ThreadState: the thread's user and env from `kept`, else read (the
        row, unless kept at `version`)."""
        state = thread_state_for(
            self._store,
            snapshot,
            thread_id=call.thread_id,
            agent=call.agent,
            prompt=calling_prompt(call, snapshot),
            session_id=call.session_id,
            turn_id=call.turn_id,
            tool_call_id=call.tool_call.id,
            # The ids this state writes under: the call's result message id, unique in the
            # thread (a model may reuse `call_1` in a later turn; ids from it would be taken
            # for the earlier call's and skipped as already stored).
            event_prefix=call.result_message_id,
            sandbox=self._sandbox,
            invoker=ToolInvoker(
                definitions=self._definitions,
                snapshot=snapshot,
                prompt=_gate_prompt(call, snapshot),
                running_call_id=call.tool_call.id,
                tool=call.tool_call.function.name,
                spans=self._spans,
            ),
            env_version=version,
            env_row=kept,
            # Anchored like the event ids above: drawn once per call by the workflow, carried
            # by every attempt of this activity, on any worker.
            idempotency_key=idempotency_key(call.thread_id, f"tool:{call.result_message_id}"),
        )
        state.use_effects(self._definitions.effects)
        return state

    def _begin_stored(
        self,
        call: ToolCallInput,
        snapshot: DefinitionSnapshot,
        events: list[Event],
        version: Hashable | None,
        kept: ThreadEnvRow | None,
    ) -> tuple[ThreadState, list[Event]]:
        """`_begin` in a thread hop, and the events still to store. Messages that precede
        the call (a queued tool's call) and events that change rows (an effect removed by
        the call before) are stored first, with the rest: the tool may read them."""
        if _store_first(call, events):
            self._store.events.record(call.prior_messages, events)
            events = []
        return self._begin(call, snapshot, version=version, kept=kept), events

    @staticmethod
    def _event(call: ToolCallInput, suffix: str, event_type: str, payload: dict[str, Any]) -> Event:
        return Event(
            type=event_type,
            event_id=f"{call.result_message_id}:{suffix}",  # see `_begin`'s event_prefix
            timestamp=now_iso(),
            thread_id=call.thread_id,
            session_id=call.session_id,
            turn_id=call.turn_id,
            step_id=call.step_id,
            tool_call_id=call.tool_call.id,
            # Inside a prompt tool, every event names the call that runs it.
            payload={**payload, **call.scope.event_fields()} if call.scope else payload,
        )


def _store_first(call: ToolCallInput, events: list[Event]) -> bool:
    """Whether the call brings what its tool may read, to store before it runs."""
    return bool(call.prior_messages) or changes_rows(events)


def _gate_prompt(call: ToolCallInput, snapshot: DefinitionSnapshot) -> PromptDef:
    """The prompt whose permission policy the workflow's gate applied to this call (the
    thread's own agent's side prompt, or a prompt tool's), for `invoke_tool`."""
    if call.scope is not None:
        return snapshot.prompts[call.scope.prompt]
    return snapshot.prompts[snapshot.agent.side(call.side).prompt]


def _message(call: ToolCallInput, result: ToolResult) -> Message:
    """The tool message that stores `result` as the answer to `call.tool_call`."""
    return Message(
        id=call.result_message_id,
        thread_id=call.thread_id,
        position=call.result_position,
        role="tool",
        content=result.model_dump_json(exclude_none=True),
        name=call.tool_call.function.name,
        tool_call_id=call.tool_call.id,
        created_at=now_micros(),
        tool_status=result.status,
        side=call.side,
        turn_id=call.turn_id,
        **(call.scope.message_fields() if call.scope else {}),
    )
