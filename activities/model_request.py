"""What `model.call` sends: what the step brings stored, its context read, the request built.

A step that brings messages (queued user messages) or events that change rows stores them
first, since the context it reads must hold them; otherwise its events wait for the call's
final write (activities/pending_events.py). The context (the thread row for its env, the
budget ledger, the boundary in force, the transcript since it) is read in one snapshot
(`store.step_reads`), then the window is built, measured and turned into the request. When
no hook shapes the request, all of it runs in one thread hop.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, TypedDict

from temporalio import activity

from weft.activities.clock import now_iso
from weft.activities.context_window import (
    Frame,
    KeptAs,
    Window,
    build_window,
    frame,
    limits_of,
    measure_request,
    preview_cap,
    selection,
    tools_for,
)
from weft.activities.env_versions import env_version
from weft.activities.hooks.model_hooks import ModelHooks
from weft.activities.images import image_view
from weft.activities.message_views import MessageViews
from weft.activities.model_budget import budget_exhausted
from weft.activities.providers import ChatRequest
from weft.activities.providers.definition_fields import definition_fields
from weft.activities.scoped_window import load_scoped_window
from weft.activities.spill import resolve_content_refs
from weft.activities.window_tails import WindowTails
from weft.contract.activities import ModelCallInput
from weft.contract.context import ContextBoundary, ContextReport
from weft.contract.definitions import DefinitionSnapshot, ModelDef
from weft.contract.events import Event
from weft.contract.hooks import HookName
from weft.contract.mcp import McpServerCatalog
from weft.contract.messages import Message
from weft.store import Store
from weft.store.events import changes_rows
from weft.store.thread_env_rows import ThreadEnvRow
from weft.store.transcripts import MessageJson, messages_of

# Hooks that change what a request holds, run between reading the context and sending it.
_SHAPING_HOOKS: tuple[HookName, ...] = (
    "filter_messages",
    "after_system_message",
    "prefilter_llm_history",
)

# A window's tail: the transcript cache's texts, or messages a prompt tool's scope chose.
_History = list[MessageJson] | list[Message]


class AttemptIds(TypedDict):
    """The ids every event of one model call attempt carries."""

    turn_id: str
    step_id: str
    model_request_id: str
    attempt_id: str


def attempt_ids(call: ModelCallInput, attempt: int) -> AttemptIds:
    """The ids of attempt `attempt` of the call's model request."""
    request_id = f"{call.step_id}.{call.model}"
    return {
        "turn_id": call.turn_id,
        "step_id": call.step_id,
        "model_request_id": request_id,
        "attempt_id": f"{request_id}.a{attempt}",
    }


def attempt_event(
    call: ModelCallInput,
    ids: AttemptIds,
    suffix: str,
    event_type: str,
    payload: dict[str, Any],
) -> Event:
    """An event of one model call attempt, its id unique per attempt and `suffix`."""
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


def context_resolved(
    call: ModelCallInput,
    model: ModelDef,
    boundary: ContextBoundary | None,
    pinned: list[Message],
    history: _History,
    window: Window,
    report: ContextReport,
) -> Event:
    """The call's `context.resolved`: what its window selected (after any hook), against
    the budget. Per attempt: each attempt reads its context again."""
    payload = {
        "model": model.name,
        **selection(boundary, pinned, history),
        "sentMessages": len(window.messages),
        "previews": window.previews,
        "requestTokens": report.request_tokens,
        "tokenScale": call.window.token_scale,
        "promptBudget": report.prompt_budget,
    }
    ids = attempt_ids(call, activity.info().attempt)
    return attempt_event(call, ids, "context", "context.resolved", payload)


class ModelRequests:
    """Builds a model call's request, storing first what its context must hold."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # Each stored message's model view and preview, worked out once per worker.
        self._views = MessageViews()
        # Each thread's last window, so the next one works out only what it adds.
        self._tails = WindowTails(self._views)

    async def prepare(
        self,
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        mcp: dict[str, McpServerCatalog],
        model: ModelDef,
        start: list[Event],
        hooks: ModelHooks,
    ) -> tuple[ChatRequest, ContextReport, list[Event]]:
        """The request and its report, and the step's events left for the final write.

        `start` are the call's own first events, `model.requested` last (a spent budget
        stores `quota.blocked` in its place).
        """
        messages, events, resolved = await hooks.new_messages(call.new_messages, call.outbox)
        lead = [*events, *start]
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
            pinned, history = [], await hooks.filter_messages([*pinned, *messages_of(history)])
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
        return (
            request,
            report,
            [context_resolved(call, model, boundary, pinned, history, window, report)],
        )

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
        # The read's own texts, unchanged by any hook: the window can be kept for the next.
        keep = call.scope is None
        window = self._window(call, model, side_frame, boundary, pinned, history, keep=keep)
        request, report = self._request(call, model, side_frame, window, boundary)
        return (
            request,
            report,
            [*lead, context_resolved(call, model, boundary, pinned, history, window, report)],
        )

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
    ) -> tuple[Frame, tuple[ContextBoundary | None, list[Message], _History], list[Event]]:
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
        version = env_version(call.env_writes, activity.info())
        if call.scope is not None:  # a prompt tool's window: its own messages too
            if lead and self._spent(call.budget_root):
                lead = self._record_checked(call, messages, events)  # refuses the call
            env = self._store.threads.env_row(call.thread_id, version)
            scoped = load_scoped_window(self._store, call.thread_id, call.window, call.scope)
            return self._frame(call, snapshot, env, mcp), scoped, lead
        read = self._store.step_reads.read(
            call.thread_id,
            env_version=version,
            boundary_id=call.window.boundary_id,
            budget_root=call.budget_root if lead else None,
            now=datetime.now(UTC),
        )
        if read.budget is not None and read.budget.spent_limit() is not None:
            # Refused in the write (quota.blocked), unless the budget was raised meanwhile.
            lead = self._record_checked(call, messages, events)
        loaded = (read.boundary, read.pinned, read.transcript)
        return self._frame(call, snapshot, read.env, mcp), loaded, lead

    @staticmethod
    def _frame(
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        env: ThreadEnvRow | None,
        mcp: dict[str, McpServerCatalog],
    ) -> Frame:
        return frame(snapshot, env, call.agent, call.side, call.scope, mcp=mcp)

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
        ids = attempt_ids(call, activity.info().attempt)
        checked = self._store.budgets.record_checked(
            root,
            messages,
            before,
            requested,
            now=datetime.now(UTC),
            make_event=lambda suffix, kind, data: attempt_event(call, ids, suffix, kind, data),
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

    def _window(
        self,
        call: ModelCallInput,
        model: ModelDef,
        side_frame: Frame,
        boundary: ContextBoundary | None,
        pinned: list[Message],
        history: _History,
        *,
        keep: bool = False,
    ) -> Window:
        """The window; with `keep`, its sums are kept for the thread's next window."""
        cap = preview_cap(model, call.window)
        key = (call.thread_id, call.side, cap, side_frame.dual)
        return build_window(
            side_frame,
            boundary,
            pinned,
            history,
            side=call.side,
            cap=cap,
            images=image_view(self._store, call.thread_id, model, side_frame.prompt),
            views=self._views,
            kept_as=KeptAs(self._tails, key) if keep else None,
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
        tokens, size = measure_request(window, tools)
        report = ContextReport(
            request_tokens=tokens,
            request_bytes=size,
            prompt_budget=limits_of(model, call.window).prompt_budget,
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
            # None once a hook changed the messages (Window.changed).
            encoded_messages=window.encoded,
            **definition_fields(prompt, model),
        )
        return request, report
