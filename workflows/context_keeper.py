"""Keeps the model's context within its window: decides when to compact, and recovers.

Before a model call, the keeper compares the projected request (the last request's
estimate plus what was added since, `ContextState`) with the budget of the model about to
be called; over it, or when a compaction was asked for, it runs `context.compact`, a
durable activity that writes one boundary (idempotent by its id). After a provider's
context-length error (or the model activity's own refusal to send an over-budget
request) it learns how far off the estimate was, compacts harder, and the caller retries
once. When summarising fails, the older turns are cut instead, with a marker saying so.
"""

from __future__ import annotations

from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from weft.contract.activities import ACTIVITY_CONTEXT_COMPACT, CompactInput, CompactResult, Usage
from weft.contract.context import CONTEXT_TOO_LONG, CompactionReason
from weft.contract.context_state import ContextState
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Message, Side
from weft.contract.thread import UsageTotals
from weft.workflows import ui_summaries
from weft.workflows.active_agent import ActiveAgent
from weft.workflows.activity_calls import Carried, Limits, start_within_budget
from weft.workflows.failures import failure_text
from weft.workflows.in_flight import InFlight
from weft.workflows.outbox import Outbox
from weft.workflows.views import Facts, Pending, Starts

# Histories recorded before compaction existed never compact on replay.
PATCH_ID = "context-compaction-v1"


class Spend(Protocol):
    """The thread's model usage, which each model call adds to."""

    cost_unknown: bool

    @property
    def usage(self) -> UsageTotals: ...


class KeeperView(Facts, Pending, Starts, Spend, Protocol):
    """What keeping the context window reads of the thread, and the window it changes."""

    @property
    def thread_id(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def active_agent(self) -> str | None: ...

    @property
    def truthful_log(self) -> bool: ...

    @property
    def window(self) -> ContextState: ...

    @property
    def mcp(self) -> McpBook: ...


class ContextKeeper:
    """Compacts the thread's context when it would not fit; one per thread."""

    def __init__(
        self, mem: KeeperView, agents: ActiveAgent, in_flight: InFlight, outbox: Outbox
    ) -> None:
        self._mem = mem
        self._outbox = outbox
        self._agents = agents
        self._in_flight = in_flight
        self._limits = Limits.of_models(mem.start.options)

    def request(self, reason: CompactionReason, note: str | None = None) -> None:
        """Compact before the next model call (a `compact` signal, or `state.compact()`)."""
        if self._mem.window.requested is None:
            self._mem.window.requested = reason
            self._mem.emit("thread.updated", {"compactionRequested": reason, "note": note})

    def requested(self) -> bool:
        return self._mem.window.requested is not None

    async def fit(
        self,
        reason: CompactionReason,
        model_name: str,
        side: Side,
        turn_id: str | None,
        step_id: str | None,
        messages: list[Message],
    ) -> list[Message]:
        """Compact for `reason` before the next request to `model_name` (the reason
        `ContextState.compaction_due` gave).

        `messages` are new messages not yet in the store; returns those still to carry
        (none once a compaction persisted them).
        """
        # A run under the truthful-log patch (asked at its start) is new code: it asks no
        # patch here, where a marker could land in another workflow task on replay (a tool's
        # `state.compact()` then failed replay: nondeterminism). Older runs ask as before.
        if not (self._mem.truthful_log or workflow.patched(PATCH_ID)):
            return messages
        return await self._compact(reason, model_name, side, turn_id, step_id, messages)

    async def recover(
        self,
        err: ActivityError,
        model_name: str,
        side: Side,
        turn_id: str,
        step_id: str,
        messages: list[Message],
    ) -> list[Message]:
        """After a context-length error: learn the estimate's error, compact harder."""
        details = overflow_details(err) or {}
        state = self._mem.window
        if details.get("source") == "estimate":
            # weft's own check refused to send it: nothing to learn about the estimate.
            state.warn(f"the request to {model_name} was over its budget; compacting harder")
        else:
            state.learn(
                _int(details.get("max_context_tokens")),
                _int(details.get("request_tokens")),
                _int(details.get("estimated_tokens")),
            )
            state.warn(f"{model_name} refused the request as too long; compacting harder")
        return await self._compact(
            "overflow", model_name, side, turn_id, step_id, messages, harder=True
        )

    async def compact_idle(self) -> None:
        """A compaction asked for while no turn runs: fit the thread's own model."""
        state = self._mem.window
        reason = state.requested or "requested"
        model_name = self._agents.prompt("a").model
        outbox = self._mem.take_outbox_messages()
        left = await self._compact(reason, model_name, "a", None, None, outbox)
        self._mem.return_messages(left)
        state.requested = None

    async def _compact(
        self,
        reason: CompactionReason,
        model_name: str,
        side: Side,
        turn_id: str | None,
        step_id: str | None,
        messages: list[Message],
        *,
        harder: bool = False,
        cut_only: bool = False,
    ) -> list[Message]:
        mem = self._mem
        carried = Carried(mem.take_outbox(), messages)
        payload = CompactInput(
            thread_id=mem.thread_id,
            session_id=mem.session_id,
            snapshot_id=self._agents.snapshot().snapshot_id,
            side=side,
            agent=mem.active_agent,
            model=model_name,
            boundary_id=mem.new_id("ctx"),
            window=mem.window.window(mem.start.options.context),
            options=mem.start.options.context,
            reason=reason,
            harder=harder,
            cut_only=cut_only,
            turn_id=turn_id,
            step_id=step_id,
            new_messages=carried.messages,
            outbox=carried.events,
            mcp_catalogs=mem.mcp.ids(),
        )
        handle, carried = await start_within_budget(
            mem,
            self._outbox,
            ACTIVITY_CONTEXT_COMPACT,
            payload,
            carried,
            without_carried={"new_messages": [], "outbox": []},
            result_type=CompactResult,
            limits=self._limits,
            summary=ui_summaries.compaction(model_name, reason, harder=harder),
        )
        self._in_flight.track(handle)
        try:
            result = await handle
        except ActivityError as err:
            mem.return_outbox(carried.events)
            if mem.is_terminated() or isinstance(err.cause, CancelledError):
                return carried.messages
            return await self._failed(err, payload, carried.messages)
        finally:
            self._in_flight.track(None)
        add_usage(mem, result.usage, result.cost_usd)
        if result.boundary is not None:
            mem.window.apply(result.boundary)
        else:
            mem.window.requested = None
            mem.window.warn(result.note or "nothing older than the recent tail to compact")
        return []

    async def _failed(
        self, err: ActivityError, payload: CompactInput, messages: list[Message]
    ) -> list[Message]:
        """Summarising failed: record it, then cut the older turns instead (no model)."""
        mem, text = self._mem, failure_text(err)
        ids = {"turn_id": payload.turn_id, "step_id": payload.step_id}
        incident = mem.incident("compaction_failed", text, **ids)
        mem.emit(
            "context.compaction.failed",
            {
                "boundaryId": payload.boundary_id,
                "reason": payload.reason,
                "cutOnly": payload.cut_only,
                "error": text,
                "incident": incident,
            },
            **ids,
        )
        mem.window.warn(f"compaction failed: {text}")
        if payload.cut_only:
            mem.window.requested = None
            return messages
        return await self._compact(
            payload.reason,
            payload.model,
            payload.side,
            payload.turn_id,
            payload.step_id,
            messages,
            harder=payload.harder,
            cut_only=True,
        )


def overflow_details(err: ActivityError) -> dict[str, Any] | None:
    """The details of a context-length error (possibly empty), or None for other errors."""
    cause = err.cause
    if not isinstance(cause, ApplicationError) or cause.type != CONTEXT_TOO_LONG:
        return None
    first = cause.details[0] if cause.details else None
    return dict(first) if isinstance(first, dict) else {}


def add_usage(mem: Spend, usage: Usage, cost_usd: float | None) -> None:
    """Add one model call's tokens and cost to the thread's totals."""
    mem.usage.input_tokens += usage.input_tokens
    mem.usage.output_tokens += usage.output_tokens
    mem.usage.cached_tokens += usage.cached_tokens
    if cost_usd is not None:
        mem.usage.cost_usd = (mem.usage.cost_usd or 0.0) + cost_usd
    elif usage.input_tokens or usage.output_tokens:
        mem.cost_unknown = True


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
