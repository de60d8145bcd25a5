"""The `context.compact` activity: summarise older turns into one boundary in the store.

It persists what the step carries (like every step activity), plans the cut
(`compaction_plan`), asks the compaction model for a summary (in chunks, each folded into
the summary so far, when the older turns do not fit that model at once), and writes the
boundary with its `context.compaction.completed` event in one transaction. The boundary
id is the idempotency key: a retry after a worker died returns the boundary already
written, so a thread never gets two boundaries for one compaction. With `cut_only` (the
workflow's fallback when summarising failed) no model is called: the boundary's text says
which messages were left out, and they stay in the store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from weft.activities.clock import now_iso
from weft.activities.compaction_plan import Plan, chunk_lines, plan_cut, render_lines
from weft.activities.context_window import (
    Frame,
    build_window,
    frame,
    limits_of,
    load_window,
    preview_cap,
    request_tokens,
    tools_for,
)
from weft.activities.mcp.catalog_store import CatalogStore
from weft.activities.model_support import cost_of, provider_for
from weft.activities.providers import ChatProvider, ChatRequest
from weft.activities.providers.definition_fields import streams
from weft.activities.snapshots import SnapshotCache
from weft.activities.spill import resolve_content_refs
from weft.activities.streaming import Heartbeater
from weft.contract.activities import ACTIVITY_CONTEXT_COMPACT, CompactInput, CompactResult, Usage
from weft.contract.context import DEFAULT_COMPACTION_PROMPT, ContextBoundary
from weft.contract.context_tokens import BYTES_PER_TOKEN, ContextLimits, estimate_tokens
from weft.contract.definitions import DefinitionSnapshot, ModelDef
from weft.contract.events import Event
from weft.contract.mcp import McpServerCatalog
from weft.store import Store

# The first line of every summarising request, so logs and scripted models can tell it apart.
REQUEST_MARKER = "[weft: compaction request]"
# Room kept in a summarising request for its framing text.
FRAMING_TOKENS = 200
MIN_SUMMARY_TOKENS = 128


@dataclass(frozen=True)
class _Prepared:
    frame: Frame
    previous: ContextBoundary | None
    plan: Plan | None
    tokens_before: int
    # What `_prepare` read: the `history.window.loaded` payload.
    loaded: dict[str, Any]


class CompactionActivities:
    """Writes compaction boundaries; providers are injected, as for `model.call`."""

    def __init__(
        self,
        store: Store,
        providers: Mapping[str, ChatProvider],
        snapshots: SnapshotCache,
        *,
        catalogs: CatalogStore | None = None,
    ) -> None:
        self._store = store
        self._providers = providers
        self._snapshots = snapshots
        self._catalogs = catalogs or CatalogStore(store)

    @activity.defn(name=ACTIVITY_CONTEXT_COMPACT)
    async def compact(self, job: CompactInput) -> CompactResult:
        """Compact the thread's context before `job.model` is called; see the module doc."""
        written = await asyncio.to_thread(
            self._store.boundaries.get, job.thread_id, job.boundary_id
        )
        if written is not None:  # a retry after the boundary was committed
            return CompactResult(boundary=written, tokens_before=written.tokens_before)
        snapshot = await self._snapshots.get(job.snapshot_id)
        target = snapshot.models[job.model]
        mcp = await self._catalogs.get_many(job.mcp_catalogs)
        prepared = await asyncio.to_thread(self._prepare, job, snapshot, target, mcp)
        if prepared.plan is None:
            return CompactResult(
                tokens_before=prepared.tokens_before,
                note="nothing older than the recent tail to compact",
            )
        plan = prepared.plan
        loaded = _event(job, "loaded", "history.window.loaded", prepared.loaded)
        await asyncio.to_thread(self._store.events.append, [loaded, self._started(job, plan)])
        usage, cost = Usage(), None
        if job.cut_only:
            summary, model_name = _cut_text(prepared.previous, plan), None
        else:
            model_name = job.options.compaction_model or job.model
            async with Heartbeater():
                summary, usage, cost = await self._summarise(
                    job, snapshot, target, prepared, model_name
                )
        boundary = ContextBoundary(
            boundary_id=job.boundary_id,
            thread_id=job.thread_id,
            kind="cut" if job.cut_only else "summary",
            reason=job.reason,
            first_kept_position=plan.first_kept_position,
            summarised_from_position=job.window.first_kept_position,
            summarised_messages=len(plan.summarised),
            pinned_message_ids=[m.id for m in plan.pinned],
            summary=summary,
            model=model_name,
            tokens_before=prepared.tokens_before,
            tokens_after=0,
            previous_boundary_id=prepared.previous.boundary_id if prepared.previous else None,
            created_at=now_iso(),
            turn_id=job.turn_id,
            step_id=job.step_id,
        )
        boundary = boundary.model_copy(
            update={"tokens_after": _tokens(prepared.frame, boundary, plan, job, target)}
        )
        stored = await asyncio.to_thread(
            self._store.boundaries.add,
            boundary,
            [_reconstructed(job, boundary), self._completed(job, boundary, usage, cost)],
        )
        return CompactResult(
            boundary=stored, tokens_before=prepared.tokens_before, usage=usage, cost_usd=cost
        )

    def _prepare(
        self,
        job: CompactInput,
        snapshot: DefinitionSnapshot,
        target: ModelDef,
        mcp: dict[str, McpServerCatalog],
    ) -> _Prepared:
        self._store.events.record(*resolve_content_refs(self._store, job.new_messages, job.outbox))
        thread = self._store.threads.get(job.thread_id)
        side_frame = frame(snapshot, thread, job.agent, job.side, mcp=mcp)
        previous, pinned, messages = load_window(self._store, job.thread_id, job.window)
        cap = preview_cap(target, job.window)
        now = build_window(side_frame, previous, pinned, messages, side=job.side, cap=cap)
        before = request_tokens(now.messages, tools_for(side_frame, now, previous))
        budget = limits_of(target, job.window).prompt_budget
        share = job.options.tail_share / (2 if job.harder else 1)
        tail_tokens = int(budget * share / job.window.token_scale)
        plan = plan_cut(messages, tail_tokens, cap, forced=job.reason in ("requested", "tool"))
        if plan is not None:
            plan = Plan(plan.summarised, [*pinned, *plan.pinned], plan.tail)
        loaded = {
            "reason": "compaction",
            "boundaryId": job.boundary_id,
            "fromBoundaryId": previous.boundary_id if previous else None,
            "fromPosition": job.window.first_kept_position,
            "messages": len(messages),
            "pinnedMessages": len(pinned),
            "firstPosition": messages[0].position if messages else None,
            "lastPosition": messages[-1].position if messages else None,
            "tokens": before,
        }
        return _Prepared(side_frame, previous, plan, before, loaded)

    async def _summarise(
        self,
        job: CompactInput,
        snapshot: DefinitionSnapshot,
        target: ModelDef,
        prepared: _Prepared,
        name: str,
    ) -> tuple[str, Usage, float | None]:
        model = snapshot.models.get(name)
        if model is None:
            raise ApplicationError(
                f"options.context.compactionModel {name!r} is not a model of this thread's "
                f"definitions (models: {', '.join(sorted(snapshot.models))})",
                type="UnknownCompactionModel",
                non_retryable=True,
            )
        provider = provider_for(self._providers, model)
        instructions = job.options.compaction_prompt or DEFAULT_COMPACTION_PROMPT
        summary_tokens = max(
            MIN_SUMMARY_TOKENS,
            int(limits_of(target, job.window).prompt_budget * job.options.summary_share),
        )
        # A window the provider reported for the target model holds for its summaries too.
        own = limits_of(model, job.window) if name == job.model else ContextLimits.for_model(model)
        room = (
            own.prompt_budget
            - estimate_tokens(instructions)
            - summary_tokens  # the summary so far rides in every chunk's request
            - FRAMING_TOKENS
        )
        if room < MIN_SUMMARY_TOKENS:
            raise ApplicationError(
                f"compaction model {name!r} has no room for the conversation: its prompt "
                f"budget is {own.prompt_budget} tokens",
                type="CompactionModelTooSmall",
                non_retryable=True,
            )
        plan = prepared.plan
        assert plan is not None
        summary = prepared.previous.summary if prepared.previous else ""
        usage = Usage()
        cost: float | None = None
        lines = render_lines(plan.summarised, cap=max(MIN_SUMMARY_TOKENS, room // 2))
        for chunk in chunk_lines(lines, room):
            reply = await provider.complete(
                ChatRequest(
                    model=model.model,
                    messages=[
                        {"role": "system", "content": instructions},
                        {"role": "user", "content": _request_text(summary, chunk)},
                    ],
                    max_output_tokens=summary_tokens,
                    provider_options=dict(model.provider_options),
                    stream=streams(model),
                ),
            )
            text = (reply.content or "").strip()
            if not text:
                raise ApplicationError(
                    f"compaction model {name!r} returned an empty summary", type="EmptySummary"
                )
            summary = _clip(text, summary_tokens)
            call = Usage(
                input_tokens=reply.usage.input_tokens,
                output_tokens=reply.usage.output_tokens,
                cached_tokens=reply.usage.cached_tokens,
            )
            usage = Usage(
                input_tokens=usage.input_tokens + call.input_tokens,
                output_tokens=usage.output_tokens + call.output_tokens,
                cached_tokens=usage.cached_tokens + call.cached_tokens,
            )
            price = cost_of(model, call)
            cost = None if price is None else (cost or 0.0) + price
        return summary, usage, cost

    def _started(self, job: CompactInput, plan: Plan) -> Event:
        return _event(
            job,
            "started",
            "context.compaction.started",
            {
                "boundaryId": job.boundary_id,
                "reason": job.reason,
                "model": None if job.cut_only else job.options.compaction_model or job.model,
                "harder": job.harder,
                "cutOnly": job.cut_only,
                "fromPosition": job.window.first_kept_position,
                "firstKeptPosition": plan.first_kept_position,
                "messages": len(plan.summarised),
            },
        )

    def _completed(
        self, job: CompactInput, boundary: ContextBoundary, usage: Usage, cost: float | None
    ) -> Event:
        # The summariser's tokens and cost count toward the thread's usage, as a model
        # call's do: stated here so a read model rebuilt from events has them.
        return _event(
            job,
            "completed",
            "context.compaction.completed",
            {
                "boundaryId": boundary.boundary_id,
                "kind": boundary.kind,
                "reason": boundary.reason,
                "model": boundary.model,
                "fromPosition": boundary.summarised_from_position,
                "firstKeptPosition": boundary.first_kept_position,
                "summarisedMessages": boundary.summarised_messages,
                "pinnedMessageIds": boundary.pinned_message_ids,
                "tokensBefore": boundary.tokens_before,
                "tokensAfter": boundary.tokens_after,
                "summaryTokens": estimate_tokens(boundary.summary),
                "usage": usage.model_dump(by_alias=True),
                "costUsd": cost,
            },
        )


def _reconstructed(job: CompactInput, boundary: ContextBoundary) -> Event:
    """The transcript the model sees from now on, rebuilt behind the new boundary: its
    summary (or cut marker), the pinned messages, then the messages from the kept one on."""
    return _event(
        job,
        "reconstructed",
        "history.reconstructed",
        {
            "boundaryId": boundary.boundary_id,
            "previousBoundaryId": boundary.previous_boundary_id,
            "kind": boundary.kind,
            "reason": boundary.reason,
            "summarisedFromPosition": boundary.summarised_from_position,
            "summarisedMessages": boundary.summarised_messages,
            "firstKeptPosition": boundary.first_kept_position,
            "pinnedMessages": len(boundary.pinned_message_ids),
            "tokensBefore": boundary.tokens_before,
            "tokensAfter": boundary.tokens_after,
        },
    )


def _tokens(
    side_frame: Frame, boundary: ContextBoundary, plan: Plan, job: CompactInput, target: ModelDef
) -> int:
    """The estimated size of the next request, built as `model.call` will build it."""
    after = build_window(
        side_frame,
        boundary,
        plan.pinned,
        plan.tail,
        side=job.side,
        cap=preview_cap(target, job.window),
    )
    return request_tokens(after.messages, tools_for(side_frame, after, boundary))


def _request_text(summary: str, chunk: list[str]) -> str:
    return (
        f"{REQUEST_MARKER}\n\nPrevious summary:\n{summary or '(none yet)'}\n\n"
        "Conversation to fold into the summary ([position] role: text):\n" + "\n".join(chunk)
    )


def _cut_text(previous: ContextBoundary | None, plan: Plan) -> str:
    if not plan.summarised:  # only pinned messages lay before the cut
        return previous.summary if previous else ""
    first, last = plan.summarised[0].position, plan.summarised[-1].position
    text = (
        f"[weft: {len(plan.summarised)} earlier messages (positions {first} to {last}) were "
        "left out of this context because summarising them failed. They are kept in the "
        "thread's store.]"
    )
    return f"{previous.summary}\n\n{text}" if previous else text


def _clip(text: str, tokens: int) -> str:
    """`text` cut to about `tokens` (a model may ignore its output limit)."""
    if estimate_tokens(text) <= tokens:
        return text
    return text.encode("utf-8")[: tokens * BYTES_PER_TOKEN].decode("utf-8", "ignore") + " …"


def _event(job: CompactInput, suffix: str, event_type: str, payload: dict[str, Any]) -> Event:
    return Event(
        type=event_type,
        event_id=f"{job.boundary_id}:{suffix}",
        timestamp=now_iso(),
        thread_id=job.thread_id,
        session_id=job.session_id,
        turn_id=job.turn_id,
        step_id=job.step_id,
        payload=payload,
    )
