"""The `model.call` activity: build the request (model_request.py), stream, persist.

Persistence rides on this activity: one round trip per model step, and for a quick call
one write, its start events with its result (pending_events.py). The first token of text
is written as soon as it streams in (with the start events), the rest in batches (about
every 100 ms), tagged with the step and the attempt, so `weft thread tail` shows the
reply as it streams.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

from weft.activities.clock import now_micros
from weft.activities.hooks import HookRegistry
from weft.activities.hooks.model_hooks import ModelHooks
from weft.activities.mcp.catalog_store import CatalogStore
from weft.activities.model_budget import AttemptCost, Payer, StreamMeter
from weft.activities.model_request import (
    AttemptIds,
    ModelRequests,
    attempt_event,
    attempt_ids,
    routing_events,
)
from weft.activities.model_support import provider_for, with_estimate
from weft.activities.previews import previewed
from weft.activities.providers import ChatProvider, ChatReply, ChatRequest, Delta
from weft.activities.providers.facts import failure_facts, reply_facts
from weft.activities.served_definitions import ServedDefinitions
from weft.activities.snapshots import SnapshotCache
from weft.activities.spill import spill_if_large
from weft.activities.streaming import DeltaBatcher, Heartbeater, delta_event
from weft.activities.structured_output import checked_reply
from weft.contract.activities import ACTIVITY_MODEL_CALL, ModelCallInput, ModelCallResult
from weft.contract.budget import BudgetState
from weft.contract.context import CONTEXT_TOO_LONG, ContextReport
from weft.contract.definitions import ModelDef
from weft.contract.definitions_version import DEFINITIONS_CHANGED, DefinitionsRefreshInput
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.store import Store


class StepWriteFailed(Exception):
    """The step's own write, made beside the request, failed: the reply is not used, and
    `error` is raised as it is, not as a failure of the model."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


async def beside(written: asyncio.Future[object] | None, reply: Awaitable[ChatReply]) -> ChatReply:
    """The provider's reply to a request sent while the step's own write commits.

    Why this is safe: the request was built from one snapshot that found the budget and
    the tenant's quota unspent (a spent one refuses the call there, unsent, as before) and
    holds the step's context, its new messages added as they will be stored. No fact of
    the reply is written before the step's write has committed: the first streamed batch
    waits for it (`DeltaBatcher`, `after`), and so does the reply's use. When the write
    fails, the request is cancelled, nothing of the reply is written, and the write's
    error fails the attempt; its retry writes the step again (every write is idempotent,
    by id) and reads a context that may already hold the messages (model_request.py
    `_appended`). The cost of a reply that came before the write failed is not charged
    (nothing of the attempt is stored): the budget undercounts that one call, which the
    retry makes again.
    """
    if written is None:
        return await reply
    call = asyncio.ensure_future(reply)
    try:
        either: list[asyncio.Future[Any]] = [written, call]
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if not written.done():  # the reply came first: it is used once the write is in
            await asyncio.wait([written])
        error = written.exception()
        if error is not None:
            raise StepWriteFailed(error)
        return await call
    finally:
        if not call.done():
            call.cancel()
            await asyncio.wait([call])
        elif not call.cancelled():
            call.exception()  # seen: when the write failed too, its error is the one raised


def truncated(
    call: ModelCallInput, ids: AttemptIds, model: ModelDef, request: ChatRequest
) -> list[Event]:
    """One `output.truncated` per output the model saw as a preview, the first time it saw
    that much of it: the id names the message and the length shown, so the store keeps
    one per preview however many steps send it again."""
    events = []
    for shown in previewed(request.messages):
        event = attempt_event(
            call,
            ids,
            "truncated",
            "output.truncated",
            {**shown, "reason": "preview", "model": model.name},
        )
        events.append(
            event.model_copy(
                update={
                    "event_id": f"{shown['messageId']}:truncated:{shown['shownChars']}",
                    "output_ref": shown["ref"],
                }
            )
        )
    return events


class ModelActivities:
    """Calls models through injected providers; the providers never retry on their own."""

    def __init__(
        self,
        store: Store,
        providers: Mapping[str, ChatProvider],
        snapshots: SnapshotCache,
        *,
        served: ServedDefinitions,
        hooks: HookRegistry | None = None,
        delta_interval: float = 0.1,
        catalogs: CatalogStore | None = None,
    ) -> None:
        self._store = store
        self._providers = providers
        self._snapshots = snapshots
        self._served = served
        self._catalogs = catalogs or CatalogStore(store)
        self._hooks = hooks or HookRegistry(store)
        self._delta_interval = delta_interval
        self._requests = ModelRequests(store)

    @activity.defn(name=ACTIVITY_MODEL_CALL)
    async def call_model(self, call: ModelCallInput) -> ModelCallResult:
        """One step's model call; returns the persisted assistant message and its usage."""
        info = activity.info()
        if call.definitions_check is not None:
            await self._check_definitions(call.definitions_check)
        snapshot = await self._snapshots.get(call.snapshot_id)
        mcp = await self._catalogs.get_many(call.mcp_catalogs)
        model = snapshot.models[call.model]
        provider = provider_for(self._providers, model)
        ids = attempt_ids(call, info.attempt)
        started = attempt_event(
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
            make_event=lambda suffix, kind, data: attempt_event(call, ids, suffix, kind, data),
            attempt_id=ids["attempt_id"],
        )
        # The routing facts go first: the model was chosen before it was requested.
        start = [*routing_events(call, snapshot, ids), started]
        # The tenant's quota is checked with the ledger, in the reads the request makes
        # anyway (a spent one refuses the call there); the charge updates the quota row
        # that read found, and nothing when it found none.
        request, report, lead, quota, write = await self._requests.prepare(
            call, snapshot, mcp, model, start, hooks
        )
        # What the step brings, when its reads did not wait for it, is stored beside the
        # request (`beside` says why that is safe).
        written = None if write is None else asyncio.ensure_future(asyncio.to_thread(write))
        payer = Payer(call.budget_root, None if quota is None else quota.tenant)
        # What a shared rate limit on the provider counts and how long it may wait.
        request = request.model_copy(
            update={
                "estimated_input_tokens": math.ceil(
                    report.request_tokens * call.window.token_scale
                ),
                "wait_allowance": partial(self._wall_seconds_left, call.budget_root),
            }
        )
        # The start events not stored yet wait with the streamed batches: a reply that
        # comes within the interval is stored with them by one final write.
        batcher = DeltaBatcher(
            self._store,
            lambda n, text, kind, index=None, call_id=None: attempt_event(
                call, ids, f"delta{n}", *delta_event(kind, text, info.attempt, index)
            ).model_copy(update={"tool_call_id": call_id} if call_id else {}),
            interval=self._delta_interval,
            lead=lead,
            after=written,
        )
        async with batcher:
            if report.request_tokens * call.window.token_scale > report.prompt_budget:
                await self._refuse_over_budget(call, ids, model, report, await batcher.take())
            return await self._stream(
                call, ids, model, provider, request, report, hooks, batcher, payer, written
            )

    async def _check_definitions(self, thread: DefinitionsRefreshInput) -> None:
        """A session's first call: when this worker serves other definitions of the agent
        (or cannot serve it), fail before anything is written or sent, carrying the answer;
        the workflow moves the thread (or warns) and calls again. The same answer as the
        `definitions.refresh` local activity, without its own boundary in the common case."""
        checked = await self._served.check(thread)
        if checked.snapshot is None and checked.refused is None:
            return
        why = checked.refused or f"this worker serves definitions {checked.digest}"
        raise ApplicationError(
            f"the thread runs definitions {thread.digest}, but {why}; the call was not made",
            checked.model_dump(mode="json", by_alias=True),
            type=DEFINITIONS_CHANGED,
            non_retryable=True,
            category=ApplicationErrorCategory.BENIGN,
        )

    async def _stream(
        self,
        call: ModelCallInput,
        ids: AttemptIds,
        model: ModelDef,
        provider: ChatProvider,
        request: ChatRequest,
        report: ContextReport,
        hooks: ModelHooks,
        batcher: DeltaBatcher,
        payer: Payer,
        written: asyncio.Future[object] | None = None,
    ) -> ModelCallResult:
        """Send the request, stream the reply into `batcher`, store the outcome (its cost
        charged to `payer`); with `written`, the step's own write under way beside it."""
        attempt = activity.info().attempt
        meter = StreamMeter()
        waiting_first = True

        async def on_delta(delta: Delta) -> None:
            nonlocal waiting_first
            meter.count(delta)
            await batcher.add(delta)
            if waiting_first and delta.kind != "tool_call" and delta.text:
                # The first token is written at once, with the call's start events: a
                # reader sees the reply begin now, not an interval later. Batches follow.
                waiting_first = False
                await batcher.flush()

        began = time.monotonic()
        reply: ChatReply | None = None
        try:
            # Its first beat after a second: the worker's own beats (workers/recovery.py)
            # cover a quick call, which then costs no heartbeat of its own.
            async with Heartbeater(wait_first=True):
                reply = await beside(written, provider.complete(request, on_delta=on_delta))
                reply = checked_reply(request, reply, attempt=attempt)
        except StepWriteFailed as write_failed:
            raise write_failed.error from None
        except ApplicationError as err:
            err = with_estimate(err, report)
            spent = AttemptCost.of_failure(model, attempt, reply, report, meter)
            failed = attempt_event(
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
            facts = [
                attempt_event(call, ids, suffix, kind, data)
                for suffix, kind, data in failure_facts(
                    err, model=model.name, provider=model.provider, attempt=attempt
                )
            ]
            taken = await batcher.take()
            await asyncio.to_thread(
                self._record_charged, call, ids, [], [*taken, failed, *facts], spent, payer
            )
            raise err from None
        duration_ms = int((time.monotonic() - began) * 1000)
        if not hooks.runner.empty:
            await batcher.flush()  # a hook may write for the thread: keep the events' order
        message, refusal = await hooks.reply(self._reply_message(call, model, reply))
        said = reply_facts(reply, model=model.name, message_id=message.id if message else None)
        events = [
            *await batcher.take(),
            *(attempt_event(call, ids, suffix, kind, data) for suffix, kind, data in said),
            *(truncated(call, ids, model, request) if report.previews else []),
            *hooks.runner.take_events(),
        ]
        result = await asyncio.to_thread(
            self._finish, call, model, reply, message, ids, duration_ms, report, events, payer
        )
        if result is None:
            await hooks.runner.flush()
            raise refusal or ApplicationError("the reply was not stored", non_retryable=True)
        await hooks.created([message] if message else [])
        return result

    async def _refuse_over_budget(
        self,
        call: ModelCallInput,
        ids: AttemptIds,
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
        failed = attempt_event(
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

    async def _wall_seconds_left(self, root: str | None) -> float | None:
        """What is left of the tree's wall-time budget, or None when it has none: a rate
        limit that would make the call wait longer fails it, so the fallback answers."""
        if root is None:
            return None
        state = await asyncio.to_thread(self._store.budgets.get, root, now=datetime.now(UTC))
        if state is None or state.limits.max_wall_seconds is None:
            return None
        return max(state.limits.max_wall_seconds - state.spent.wall_seconds, 0.0)

    def _record_charged(
        self,
        call: ModelCallInput,
        ids: AttemptIds,
        messages: list[Message],
        events: list[Event],
        spent: AttemptCost,
        payer: Payer,
    ) -> BudgetState | None:
        """Store an attempt's messages and events with its `cost.recorded`, charging the
        ledger (and the tenant's quota row, when the call's read found one) in the same
        transaction (only when that event is new: retries count once)."""
        cost = attempt_event(
            call, ids, "cost", "cost.recorded", spent.payload(payer.root_thread_id)
        )
        _, state = self._store.budgets.record_charged(
            messages,
            [*events, cost],
            spent.charge(payer, cost.event_id),
            now=datetime.now(UTC),
            make_event=lambda suffix, kind, data: attempt_event(call, ids, suffix, kind, data),
            # A reply that comes after the thread closed is not written; its cost is.
            unless_closed=True,
        )
        return state

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
        ids: AttemptIds,
        duration_ms: int,
        report: ContextReport,
        events: list[Event],
        payer: Payer,
    ) -> ModelCallResult | None:
        spent = AttemptCost.of_reply(model, activity.info().attempt, reply)
        usage, cost = spent.usage, spent.cost_usd
        completed = attempt_event(
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
            self._record_charged(call, ids, [], [*events, completed], spent, payer)
            return None
        returned, spilled = spill_if_large(
            message,
            ids={"session_id": call.session_id, "turn_id": call.turn_id, "step_id": call.step_id},
        )
        budget = self._record_charged(
            call, ids, [message], [*events, *filter(None, [spilled]), completed], spent, payer
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
