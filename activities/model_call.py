"""The `model.call` activity: persist queued messages, assemble context, stream, persist.

Persistence rides on this activity: one round trip per model step. Deltas reach the store
in batches (about every 100 ms), tagged with the step and the attempt, so `weft thread
tail` shows the reply as it streams.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

from temporalio import activity
from temporalio.exceptions import ApplicationError

from weft.activities.clock import now_iso, now_micros
from weft.activities.context_window import (
    Frame,
    Window,
    budget_of,
    build_window,
    frame,
    preview_cap,
    request_bytes,
    request_tokens,
    tools_for,
)
from weft.activities.hooks import HookRegistry
from weft.activities.hooks.model_hooks import ModelHooks
from weft.activities.images import image_view
from weft.activities.mcp.catalog_store import CatalogStore
from weft.activities.message_views import MessageViews
from weft.activities.model_budget import AttemptCost, StreamMeter, budget_exhausted
from weft.activities.model_support import provider_for, with_estimate
from weft.activities.providers import ChatProvider, ChatReply, ChatRequest, Delta
from weft.activities.providers.definition_fields import definition_fields
from weft.activities.scoped_window import load_scoped_window
from weft.activities.snapshots import SnapshotCache
from weft.activities.spill import resolve_content_refs, spill_if_large
from weft.activities.store import Store
from weft.activities.store.events import changes_rows
from weft.activities.store.rows import ThreadRow
from weft.activities.streaming import DeltaBatcher, Heartbeater, delta_event
from weft.activities.structured_output import checked_reply
from weft.contract.activities import ACTIVITY_MODEL_CALL, ModelCallInput, ModelCallResult
from weft.contract.budget import BudgetState
from weft.contract.context import CONTEXT_TOO_LONG, ContextBoundary, ContextReport
from weft.contract.definitions import DefinitionSnapshot, ModelDef
from weft.contract.events import Event
from weft.contract.hooks import HookName
from weft.contract.mcp import McpServerCatalog
from weft.contract.messages import Message

# Hooks that change what a request holds, run between reading the context and sending it.
_SHAPING_HOOKS: tuple[HookName, ...] = (
    "filter_messages",
    "after_system_message",
    "prefilter_llm_history",
)


class ModelActivities:
    """Calls models through injected providers; the providers never retry on their own."""

    def __init__(
        self,
        store: Store,
        providers: Mapping[str, ChatProvider],
        snapshots: SnapshotCache,
        *,
        hooks: HookRegistry | None = None,
        delta_interval: float = 0.1,
        catalogs: CatalogStore | None = None,
    ) -> None:
        self._store = store
        self._providers = providers
        self._snapshots = snapshots
        self._catalogs = catalogs or CatalogStore(store)
        self._hooks = hooks or HookRegistry(store)
        self._delta_interval = delta_interval
        self._views = MessageViews()

    @activity.defn(name=ACTIVITY_MODEL_CALL)
    async def call_model(self, call: ModelCallInput) -> ModelCallResult:
        """One step's model call; returns the persisted assistant message and its usage."""
        info = activity.info()
        snapshot = await self._snapshots.get(call.snapshot_id)
        mcp = await self._catalogs.get_many(call.mcp_catalogs)
        model = snapshot.models[call.model]
        provider = provider_for(self._providers, model)
        ids = _ids(call, info.attempt)
        started = self._event(
            call,
            ids,
            "requested",
            "model.requested",
            {
                "model": model.name,
                "providerModel": model.model,
                "attempt": info.attempt,
                # A retry restarts the text: clients drop what they showed for this step.
                "reset": info.attempt > 1,
            },
        )
        hooks = ModelHooks(
            self._hooks,
            self._store,
            snapshot,
            call,
            make_event=lambda suffix, kind, data: self._event(call, ids, suffix, kind, data),
            attempt_id=ids["attempt_id"],
        )
        request, report, lead = await self._prepare(call, snapshot, mcp, model, started, hooks)
        # The start events not stored yet wait with the streamed batches: a reply that
        # comes within the interval is stored with them by one final write.
        batcher = DeltaBatcher(
            self._store,
            lambda n, text, kind: self._event(
                call, ids, f"delta{n}", *delta_event(kind, text, info.attempt)
            ),
            interval=self._delta_interval,
            lead=lead,
        )
        async with batcher:
            if report.request_tokens * call.window.token_scale > report.prompt_budget:
                await self._refuse_over_budget(call, ids, model, report, await batcher.take())
            return await self._stream(call, ids, model, provider, request, report, hooks, batcher)

    async def _stream(
        self,
        call: ModelCallInput,
        ids: _AttemptIds,
        model: ModelDef,
        provider: ChatProvider,
        request: ChatRequest,
        report: ContextReport,
        hooks: ModelHooks,
        batcher: DeltaBatcher,
    ) -> ModelCallResult:
        """Send the request, stream the reply into `batcher`, store the outcome."""
        attempt = activity.info().attempt
        meter = StreamMeter()

        async def on_delta(delta: Delta) -> None:
            meter.count(delta)
            await batcher.add(delta)

        began = time.monotonic()
        reply: ChatReply | None = None
        try:
            # Its first beat after a second: the worker's own beats (workers/recovery.py)
            # cover a quick call, which then costs no heartbeat of its own.
            async with Heartbeater(wait_first=True):
                reply = await provider.complete(request, on_delta=on_delta)
                reply = checked_reply(request, reply, attempt=attempt)
        except ApplicationError as err:
            err = with_estimate(err, report)
            spent = AttemptCost.of_failure(model, attempt, reply, report, meter)
            failed = self._event(
                call,
                ids,
                "failed",
                "model.failed",
                {
                    "model": model.name,
                    "attempt": attempt,
                    "error": str(err),
                    "errorType": err.type,
                    "retryable": not err.non_retryable,
                },
            )
            taken = await batcher.take()
            await asyncio.to_thread(self._record_charged, call, ids, [], [*taken, failed], spent)
            raise err from None
        duration_ms = int((time.monotonic() - began) * 1000)
        if not hooks.runner.empty:
            await batcher.flush()  # a hook may write for the thread: keep the events' order
        message, refusal = await hooks.reply(self._reply_message(call, model, reply))
        events = [*await batcher.take(), *hooks.runner.take_events()]
        result = await asyncio.to_thread(
            self._finish, call, model, reply, message, ids, duration_ms, report, events
        )
        if result is None:
            await hooks.runner.flush()
            raise refusal or ApplicationError("the reply was not stored", non_retryable=True)
        await hooks.created([message] if message else [])
        return result

    async def _refuse_over_budget(
        self,
        call: ModelCallInput,
        ids: _AttemptIds,
        model: ModelDef,
        report: ContextReport,
        pending: list[Event],
    ) -> None:
        """Do not send what cannot fit: the workflow compacts and tries once more."""
        message = (
            f"the request to model {model.name!r} is estimated at {report.request_tokens} "
            f"tokens (x{call.window.token_scale:g}), over its prompt budget of "
            f"{report.prompt_budget}; it was not sent"
        )
        failed = self._event(
            call,
            ids,
            "failed",
            "model.failed",
            {
                "model": model.name,
                "attempt": activity.info().attempt,
                "error": message,
                "errorType": CONTEXT_TOO_LONG,
                "retryable": False,
            },
        )
        await asyncio.to_thread(self._store.events.append, [*pending, failed])
        raise ApplicationError(
            message,
            {
                "estimated_tokens": report.request_tokens,
                "prompt_budget": report.prompt_budget,
                "source": "estimate",
            },
            type=CONTEXT_TOO_LONG,
            non_retryable=True,
        )

    async def _prepare(
        self,
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        mcp: dict[str, McpServerCatalog],
        model: ModelDef,
        started: Event,
        hooks: ModelHooks,
    ) -> tuple[ChatRequest, ContextReport, list[Event]]:
        """The request and its report, and the step's events left for the final write."""
        messages, events, resolved = await hooks.new_messages(call.new_messages, call.outbox)
        lead = [*events, started]
        if not hooks.runner.has(*_SHAPING_HOOKS):
            # Nothing runs between reading the context and sending it: one thread hop
            # for the whole assembly instead of three.
            request, report, lead = await asyncio.to_thread(
                self._assemble,
                call,
                snapshot,
                mcp,
                model,
                messages,
                lead,
                resolved,
                defer=hooks.runner.empty,
            )
            await hooks.created(messages)
            await hooks.runner.flush()
            return request, report, lead
        side_frame, loaded, _ = await asyncio.to_thread(
            self._load, call, snapshot, mcp, messages, lead, resolved, defer=False
        )
        await hooks.created(messages)
        boundary, pinned, history = loaded
        if hooks.runner.has("filter_messages"):
            pinned, history = [], await hooks.filter_messages([*pinned, *history])
        side_frame = await hooks.system_prompt(side_frame)
        window = await asyncio.to_thread(
            self._window, call, model, side_frame, boundary, pinned, history
        )
        # Filtered before it is measured: the budget counts what is really sent.
        window = await hooks.prefilter(window)
        request, report = await asyncio.to_thread(
            self._request, call, model, side_frame, window, boundary
        )
        await hooks.runner.flush()
        return request, report, []

    def _assemble(
        self,
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        mcp: dict[str, McpServerCatalog],
        model: ModelDef,
        messages: list[Message],
        events: list[Event],
        resolved: bool,
        *,
        defer: bool,
    ) -> tuple[ChatRequest, ContextReport, list[Event]]:
        side_frame, (boundary, pinned, history), lead = self._load(
            call, snapshot, mcp, messages, events, resolved, defer=defer
        )
        window = self._window(call, model, side_frame, boundary, pinned, history)
        return *self._request(call, model, side_frame, window, boundary), lead

    def _load(
        self,
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        mcp: dict[str, McpServerCatalog],
        messages: list[Message],
        events: list[Event],
        resolved: bool,
        *,
        defer: bool,
    ) -> tuple[Frame, tuple[ContextBoundary | None, list[Message], list[Message]], list[Event]]:
        """The frame and the window's messages, read after what the step brings is stored,
        and the events left for the final write. One thread hop.

        With `defer`, a step that brings no messages and no events that change rows does
        not write first: its events wait for the final write, and the ledger is read
        with the context, in one snapshot (`store.step_reads`). A charge never depended on
        reading the ledger in a write: it is one atomic update when the attempt ends.
        """
        if not resolved:
            messages, events = resolve_content_refs(self._store, messages, events)
        # Messages and events that project into rows (effects, ledgers, …) are stored
        # first: the step reads what they change.
        store_first = not defer or bool(messages) or changes_rows(events)
        lead = self._record_checked(call, messages, events) if store_first else events
        if call.scope is not None:  # a prompt tool's window: its own messages too
            if lead and self._spent(call.budget_root):
                lead = self._record_checked(call, messages, events)  # refuses the call
            thread = self._store.threads.get(call.thread_id)
            loaded = load_scoped_window(self._store, call.thread_id, call.window, call.scope)
            return self._frame(call, snapshot, thread, mcp), loaded, lead
        read = self._store.step_reads.read(
            call.thread_id,
            boundary_id=call.window.boundary_id,
            budget_root=call.budget_root if lead else None,
            now=datetime.now(UTC),
        )
        if read.budget is not None and read.budget.spent_limit() is not None:
            # Refused in the write (quota.blocked), unless the budget was raised meanwhile.
            lead = self._record_checked(call, messages, events)
        loaded = (read.boundary, read.pinned, read.transcript)
        return self._frame(call, snapshot, read.thread, mcp), loaded, lead

    @staticmethod
    def _frame(
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        thread: ThreadRow | None,
        mcp: dict[str, McpServerCatalog],
    ) -> Frame:
        return frame(snapshot, thread, call.agent, call.side, call.scope, mcp=mcp)

    def _record_checked(
        self, call: ModelCallInput, messages: list[Message], events: list[Event]
    ) -> list[Event]:
        """Store what the step brings (nothing is left for the final write: returns []).

        The budget ledger, when the call has one, is read in the same transaction, and a
        spent budget stores `quota.blocked` instead of `model.requested` (the last event)
        and refuses the call.
        """
        root = call.budget_root
        if root is None:
            self._store.events.record(messages, events)
            return []
        *before, requested = events
        ids = _ids(call, activity.info().attempt)
        checked = self._store.budgets.record_checked(
            root,
            messages,
            before,
            requested,
            now=datetime.now(UTC),
            make_event=lambda suffix, kind, data: self._event(call, ids, suffix, kind, data),
        )
        if checked.state is not None and checked.refused_by is not None:
            raise budget_exhausted(checked.state, checked.refused_by)
        return []

    def _spent(self, root: str | None) -> bool:
        """Whether the tree's ledger has a limit spent (then the write path refuses)."""
        if root is None:
            return False
        state = self._store.budgets.get(root, now=datetime.now(UTC))
        return state is not None and state.spent_limit() is not None

    def _record_charged(
        self,
        call: ModelCallInput,
        ids: _AttemptIds,
        messages: list[Message],
        events: list[Event],
        spent: AttemptCost,
    ) -> BudgetState | None:
        """Store an attempt's messages and events with its `cost.recorded`, charging the
        ledger in the same transaction (only when that event is new: retries count once)."""
        root = call.budget_root
        cost = self._event(call, ids, "cost", "cost.recorded", spent.payload(root))
        _, state = self._store.budgets.record_charged(
            messages,
            [*events, cost],
            spent.charge(root, cost.event_id),
            now=datetime.now(UTC),
            make_event=lambda suffix, kind, data: self._event(call, ids, suffix, kind, data),
        )
        return state

    def _window(
        self,
        call: ModelCallInput,
        model: ModelDef,
        side_frame: Frame,
        boundary: ContextBoundary | None,
        pinned: list[Message],
        history: list[Message],
    ) -> Window:
        return build_window(
            side_frame,
            boundary,
            pinned,
            history,
            side=call.side,
            cap=preview_cap(model, call.window),
            images=image_view(self._store, call.thread_id, model, side_frame.prompt),
            views=self._views,
        )

    def _request(
        self,
        call: ModelCallInput,
        model: ModelDef,
        side_frame: Frame,
        window: Window,
        boundary: ContextBoundary | None,
    ) -> tuple[ChatRequest, ContextReport]:
        capabilities = model.capabilities
        tools = tools_for(
            side_frame,
            window,
            boundary,
            model_calls_tools=capabilities is None or capabilities.supports_tool_calls is not False,
        )
        report = ContextReport(
            request_tokens=request_tokens(window.messages, tools),
            request_bytes=request_bytes(window.messages, tools),
            prompt_budget=budget_of(model, call.window).prompt_budget,
            previews=window.previews,
            boundary_id=boundary.boundary_id if boundary else None,
        )
        prompt = side_frame.prompt
        request = ChatRequest(
            model=model.model,
            messages=window.messages,
            tools=tools,
            tool_choice=prompt.tool_choice if tools or model.provider_tools else None,
            parallel_tool_calls=(
                prompt.parallel_tool_calls if tools or model.provider_tools else None
            ),
            max_output_tokens=model.capabilities.max_output_tokens if model.capabilities else None,
            provider_options={**model.provider_options, **prompt.provider_options},
            **definition_fields(prompt, model),
        )
        return request, report

    @staticmethod
    def _reply_message(call: ModelCallInput, model: ModelDef, reply: ChatReply) -> Message:
        """The assistant message the reply becomes (before the create hooks see it)."""
        return Message(
            id=call.assistant_message_id,
            thread_id=call.thread_id,
            position=call.assistant_position,
            role="assistant",
            content=reply.content,
            tool_calls=reply.tool_calls or None,
            reasoning_content=reply.reasoning_content,
            created_at=now_micros(),
            side=call.side,
            turn_id=call.turn_id,
            metadata={"model": model.name, "stepId": call.step_id, **reply.message_metadata()},
            **(call.scope.message_fields() if call.scope else {}),
        )

    def _finish(
        self,
        call: ModelCallInput,
        model: ModelDef,
        reply: ChatReply,
        message: Message | None,
        ids: _AttemptIds,
        duration_ms: int,
        report: ContextReport,
        events: list[Event],
    ) -> ModelCallResult | None:
        spent = AttemptCost.of_reply(model, activity.info().attempt, reply)
        usage, cost = spent.usage, spent.cost_usd
        completed = self._event(
            call,
            ids,
            "completed",
            "model.completed",
            {
                "model": model.name,
                "providerModel": reply.model,
                "messageId": message.id if message else None,
                "finishReason": reply.finish_reason,
                "toolCalls": len(reply.tool_calls),
                "usage": usage.model_dump(by_alias=True),
                "costUsd": cost,
                "durationMs": duration_ms,
                "context": report.model_dump(by_alias=True),
            },
        )
        if message is None:  # a before_create_message hook refused the reply
            self._record_charged(call, ids, [], [*events, completed], spent)
            return None
        returned, spilled = spill_if_large(
            message,
            ids={"session_id": call.session_id, "turn_id": call.turn_id, "step_id": call.step_id},
        )
        budget = self._record_charged(
            call, ids, [message], [*events, *filter(None, [spilled]), completed], spent
        )
        return ModelCallResult(
            message=returned,
            usage=usage,
            cost_usd=cost,
            model=model.name,
            finish_reason=reply.finish_reason,
            context=report,
            budget=budget,
        )

    @staticmethod
    def _event(
        call: ModelCallInput,
        ids: _AttemptIds,
        suffix: str,
        event_type: str,
        payload: dict[str, Any],
    ) -> Event:
        return Event(
            type=event_type,
            event_id=f"{ids['attempt_id']}:{suffix}",
            timestamp=now_iso(),
            thread_id=call.thread_id,
            session_id=call.session_id,
            # Inside a prompt tool, every event names the call that runs it.
            payload={**payload, **call.scope.event_fields()} if call.scope else payload,
            **ids,
        )


class _AttemptIds(TypedDict):
    """The ids every event of one model call attempt carries."""

    turn_id: str
    step_id: str
    model_request_id: str
    attempt_id: str


def _ids(call: ModelCallInput, attempt: int) -> _AttemptIds:
    request_id = f"{call.step_id}.{call.model}"
    return {
        "turn_id": call.turn_id,
        "step_id": call.step_id,
        "model_request_id": request_id,
        "attempt_id": f"{request_id}.a{attempt}",
    }
