"""What `model.call` sends: what the step brings stored, its context read, the request built;
and the facts of one attempt (its ids and events, the routing facts).

A step that brings messages (queued user messages) or events that change rows stores them
first, since the context it reads must hold them; otherwise its events wait for the call's
final write (activities/pending_events.py). The context (the thread row for its env, the
budget ledger with its tenant's quota, the boundary in force, the transcript since it) is
read in one snapshot (`store.step_reads`), then one call into the window module (`context_window.assemble`)
gives everything the request holds of it: frame, window, tools, measure and selection.
When no hook shapes the request, all of it runs in one thread hop.

A step whose only writes are its new messages and events that change no row the call
reads (the queue's depth) does not wait for them: the context is read first, the new
messages added to the window as they will be stored, and the write is handed back
(`Prepared.write`) to be made beside the request (model_call.py says why that is safe).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any, NamedTuple, TypedDict

from temporalio import activity

from weft.activities.clock import now_iso
from weft.activities.context_window import (
    Assembled,
    Frame,
    Framed,
    Frames,
    Window,
    assemble,
    build_window,
    image_view,
    limits_of,
    preview_cap,
    request_of,
    selection,
)
from weft.activities.env_versions import env_version
from weft.activities.hooks.model_hooks import ModelHooks
from weft.activities.message_views import VIEWS_PER_THREAD, MessageViews, WindowTails
from weft.activities.model_budget import budget_exhausted, tenant_quota_exhausted
from weft.activities.providers import ChatRequest
from weft.activities.providers.definition_fields import definition_fields
from weft.activities.scoped_window import load_scoped_window
from weft.activities.spill import CONTENT_REF, resolve_content_refs
from weft.contract.activities import ModelCallInput
from weft.contract.context import ContextBoundary, ContextReport
from weft.contract.definitions import DefinitionSnapshot, ModelDef, PromptDef
from weft.contract.events import Event
from weft.contract.hooks import HookName
from weft.contract.mcp import McpServerCatalog
from weft.contract.messages import Message
from weft.store import Store
from weft.store.events import changes_rows
from weft.store.queue_rows import QUEUE_CHANGED
from weft.store.tenant_quotas import TenantQuota
from weft.store.transcripts import MessageJson, message_json, messages_of

# Hooks that change what a request holds, run between reading the context and sending it.
_SHAPING_HOOKS: tuple[HookName, ...] = (
    "filter_messages",
    "after_system_message",
    "prefilter_llm_history",
)

# A window's tail: the transcript cache's texts, or messages a prompt tool's scope chose.
_History = list[MessageJson] | list[Message]
# The window's parts as read: the boundary in force, its pinned messages, the tail.
_Loaded = tuple[ContextBoundary | None, list[Message], _History]
# The step's own write, not made yet: it stores what the step brings.
StepWrite = Callable[[], object]


class Prepared(NamedTuple):
    """A model call's request, its report, the step's events left for the final write, and
    the tenant's quota as the call's ledger read found it (the charge updates it by its
    key, or nothing when it is None); the step's own write when it is left to be made
    beside the request (None: made already, or nothing to make)."""

    request: ChatRequest
    report: ContextReport
    lead: list[Event]
    quota: TenantQuota | None
    write: StepWrite | None = None


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


# -- the routing facts: the models that may answer the call, and which one it uses ------
#
# The workflow tries a prompt's model, then its fallbacks in order (workflows/model_step.py);
# each try is one `model.call`, which knows from the snapshot where its model stands in that
# list. Their ids leave the attempt out, so a retried attempt writes each fact once, and so
# does the same model called again after a compaction in the same step.

# How weft chooses: the prompt names its model, the model names its fallbacks.
DECISION_SOURCE = "prompt_model"


def candidates_of(call: ModelCallInput, snapshot: DefinitionSnapshot) -> list[str]:
    """The models that may answer the call, in the order the workflow tries them."""
    if call.scope is not None:
        prompt = snapshot.prompts[call.scope.prompt]
    else:
        prompt = snapshot.prompts[snapshot.agent_def(call.agent).side(call.side).prompt]
    return [prompt.model, *snapshot.models[prompt.model].fallbacks]


def routing_events(
    call: ModelCallInput, snapshot: DefinitionSnapshot, ids: AttemptIds
) -> list[Event]:
    """`routing.candidates.resolved` and `routing.decided` (or `routing.single_candidate`)
    for the first model, `routing.fallback.applied` for a fallback: decided together, so
    stamped with one instant."""
    candidates = candidates_of(call, snapshot)
    if call.model not in candidates:  # not routed by the prompt: nothing to explain
        return []
    rank = candidates.index(call.model)
    model = snapshot.models[call.model]
    chosen = {
        "selectedModel": model.name,
        "provider": model.provider,
        "providerModel": model.model,
        "candidateCount": len(candidates),
        "rank": rank,
        "decisionSource": DECISION_SOURCE,
    }
    facts: list[tuple[str, dict[str, Any]]]
    if rank > 0:
        # Why the previous model gave up is its `model.failed` and the workflow's
        # `runtime.warning` (code `model_failed`), written with this call.
        fallback = {**chosen, "fromModel": candidates[rank - 1], "reason": "model_failed"}
        facts = [("routing.fallback.applied", fallback)]
    else:
        resolved = {
            "candidates": candidates,
            "candidateCount": len(candidates),
            "decisionSource": DECISION_SOURCE,
        }
        decided = (
            ("routing.single_candidate", chosen)
            if len(candidates) == 1
            else ("routing.decided", {**chosen, "fallbacks": candidates[1:]})
        )
        facts = [("routing.candidates.resolved", resolved), decided]
    at = now_iso()
    request_id = ids["model_request_id"]
    events = []
    for event_type, payload in facts:
        events.append(
            Event(
                type=event_type,
                event_id=f"{request_id}:{event_type}",
                timestamp=at,
                thread_id=call.thread_id,
                session_id=call.session_id,
                turn_id=ids["turn_id"],
                step_id=ids["step_id"],
                model_request_id=request_id,
                # Inside a prompt tool, every event names the call that runs it.
                payload={**payload, **call.scope.event_fields()} if call.scope else payload,
            )
        )
    return events


def context_resolved(
    call: ModelCallInput,
    model: ModelDef,
    window: Window,
    report: ContextReport,
    selected: dict[str, Any],
) -> Event:
    """The call's `context.resolved`: what its window selected (`selected`, after any
    hook), against the budget. Per attempt: each attempt reads its context again."""
    payload = {
        "model": model.name,
        **selected,
        "sentMessages": len(window.messages),
        "previews": window.previews,
        "requestTokens": report.request_tokens,
        "tokenScale": call.window.token_scale,
        "promptBudget": report.prompt_budget,
    }
    ids = attempt_ids(call, activity.info().attempt)
    return attempt_event(call, ids, "context", "context.resolved", payload)


def chat_request(
    model: ModelDef, prompt: PromptDef, window: Window, tools: list[dict[str, Any]]
) -> ChatRequest:
    """What the provider adapter is asked to send: the window, the tools and the model's
    and the prompt's settings."""
    offers = bool(tools or model.provider_tools)
    return ChatRequest(
        model=model.model,
        messages=window.messages,
        tools=tools,
        tool_choice=prompt.tool_choice if offers else None,
        parallel_tool_calls=prompt.parallel_tool_calls if offers else None,
        max_output_tokens=model.capabilities.max_output_tokens if model.capabilities else None,
        provider_options={**model.provider_options, **prompt.provider_options},
        # None once a hook changed the messages (Window.changed).
        encoded_messages=window.encoded,
        **definition_fields(prompt, model),
    )


class ModelRequests:
    """Builds a model call's request, storing first what its context must hold."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # Kept for the threads the worker's workflow cache holds, and forgotten with them
        # (store/thread_cache_budget.py).
        threads = store.caches.threads
        # Each stored message's model view and preview, worked out once per worker.
        self._views = MessageViews(threads, store.caches.per_thread(VIEWS_PER_THREAD))
        # Each thread's last window, so the next one works out only what it adds.
        self._tails = WindowTails(
            self._views, store.caches.per_thread(VIEWS_PER_THREAD), max_threads=threads
        )
        # Each side's system prompt and tools, worked out once per snapshot and env.
        self._frames = Frames(threads)
        store.caches.join("message views", self._views)
        store.caches.join("window tails", self._tails)
        store.caches.join("frames", self._frames)

    async def prepare(
        self,
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        mcp: dict[str, McpServerCatalog],
        model: ModelDef,
        start: list[Event],
        hooks: ModelHooks,
    ) -> Prepared:
        """The request and its report, the step's events left for the final write, and
        the tenant's quota read with the ledger.

        `start` are the call's own first events, `model.requested` last (a spent budget
        or tenant quota stores `quota.blocked` in its place and refuses the call).
        """
        if hooks.idle:
            # No hook runs between reading the context and sending it: one thread hop
            # for the whole assembly.
            lead = [*call.outbox, *start]
            return await asyncio.to_thread(
                self._assemble,
                call,
                snapshot,
                mcp,
                model,
                call.new_messages,
                lead,
                False,
                beside=True,
            )
        messages, events, resolved = await hooks.new_messages(call.new_messages, call.outbox)
        lead = [*events, *start]
        if not hooks.runner.has(*_SHAPING_HOOKS):
            prepared = await asyncio.to_thread(
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
            return prepared
        framed, loaded, _, quota, _ = await asyncio.to_thread(
            self._load, call, snapshot, mcp, messages, lead, resolved, defer=False
        )
        await hooks.created(messages)
        boundary, pinned, history = loaded
        if hooks.runner.has("filter_messages"):
            pinned, history = [], await hooks.filter_messages([*pinned, *messages_of(history)])
        side_frame = await hooks.system_prompt(framed.frame)
        window = await asyncio.to_thread(
            self._window, call, model, side_frame, boundary, pinned, history
        )
        # Filtered before it is measured: the budget counts what is really sent.
        window = await hooks.prefilter(window)
        request, report = await asyncio.to_thread(
            self._request, call, model, side_frame, window, boundary
        )
        await hooks.runner.flush()
        resolved_event = context_resolved(
            call, model, window, report, selection(boundary, pinned, history)
        )
        return Prepared(request, report, [resolved_event], quota)

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
        defer: bool = True,
        beside: bool = False,
    ) -> Prepared:
        """What the step brings stored (or, with `beside`, left to store beside the
        request), its context read, the request built: one thread hop, one call into the
        window module for everything the request holds of it."""
        framed, (boundary, pinned, history), lead, quota, write = self._load(
            call, snapshot, mcp, messages, events, resolved, defer=defer, beside=beside
        )
        built: Assembled = assemble(
            framed,
            boundary,
            pinned,
            history,
            model=model,
            window=call.window,
            side=call.side,
            files=self._store,
            thread_id=call.thread_id,
            views=self._views,
            # The read's own texts, unchanged by any hook: the window can be kept for the
            # next (a prompt tool's scoped window is not the thread's).
            tails=self._tails if call.scope is None else None,
        )
        request = chat_request(model, built.frame.prompt, built.window, built.tools)
        resolved_event = context_resolved(call, model, built.window, built.report, built.selection)
        return Prepared(request, built.report, [*lead, resolved_event], quota, write)

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
        beside: bool = False,
    ) -> tuple[Framed, _Loaded, list[Event], TenantQuota | None, StepWrite | None]:
        """The frame and the window's messages, read after what the step brings is stored,
        the events left for the final write, the tenant's quota, and the step's own write
        when it is left to be made beside the request. One thread hop.

        With `defer`, a step that brings no messages and no events that change rows does
        not write first: its events wait for the final write, and the ledger (with the
        tenant's quota) is read with the context, in one snapshot (`store.step_reads`). A
        charge never depended on reading the ledger in a write: it is one atomic update
        when the attempt ends. Either way the ledger and the quota are read once, in one
        statement.

        With `beside`, a step whose writes the call's reads do not depend on, but for its
        new messages (`_writes_beside`), is read first, its messages added to the window
        as they will be stored; its write is returned, not made.
        """
        beside = beside and _writes_beside(call, messages, events, resolved)
        # Messages and events that project into rows (effects, ledgers, …) are stored
        # first: the step reads what they change.
        store_first = not beside and (not defer or bool(messages) or changes_rows(events))
        lead, quota = events, None
        if store_first:
            lead, quota = [], self._record_checked(call, messages, events, resolved)
        version = env_version(call.env_writes, activity.info())
        # Everything the frame depends on; None when the env may have changed unseen.
        key = (
            None
            if version is None
            else (
                call.snapshot_id,
                call.agent,
                call.side,
                call.scope.prompt if call.scope else None,
                version,
                tuple(sorted(call.mcp_catalogs.items())),
            )
        )
        if call.scope is not None:  # a prompt tool's window: its own messages too
            if lead:
                checked = self._store.budgets.check(
                    call.budget_root, call.thread_id, now=datetime.now(UTC)
                )
                quota = checked.quota
                if checked.tenant_spent or checked.refused_by is not None:
                    lead, quota = [], self._record_checked(call, messages, events, resolved)
            env = self._store.threads.env_row(call.thread_id, version)
            scoped = load_scoped_window(self._store, call.thread_id, call.window, call.scope)
            framed = self._frames.get(
                call.thread_id, key, snapshot, env, call.agent, call.side, call.scope, mcp=mcp
            )
            return framed, scoped, lead, quota, None
        read = self._store.step_reads.read(
            call.thread_id,
            env_version=version,
            boundary_id=call.window.boundary_id,
            budget_root=call.budget_root,
            check_budget=bool(lead),  # else the write above read them
            now=datetime.now(UTC),
        )
        if lead:
            quota = read.quota
        spent = read.budget is not None and read.budget.spent_limit() is not None
        if spent or (read.quota is not None and read.quota.spent_limit() is not None):
            # Refused in the write (quota.blocked), unless the budget was raised meanwhile.
            lead, quota = [], self._record_checked(call, messages, events, resolved)
            if beside:  # stored after the read (the budget was raised): read again
                return self._reread(call, snapshot, mcp, quota)
        framed = self._frames.get(
            call.thread_id, key, snapshot, read.env, call.agent, call.side, mcp=mcp
        )
        transcript: list[MessageJson] = read.transcript
        write: StepWrite | None = None
        if beside:
            appended = _appended(read.transcript, messages)
            if appended is None:  # not after the stored transcript: store first, read again
                quota = self._record_checked(call, messages, events, resolved)
                return self._reread(call, snapshot, mcp, quota)
            transcript = [*read.transcript, *appended]
            # The events go with the write: the final write gets what the call adds. The
            # ledger and the quota were read unspent with the context, as a step without
            # messages reads them: the write need not read them again (a charge is one
            # atomic update when the attempt ends).
            write = partial(self._store.events.record, messages, events)
            lead = []
        return framed, (read.boundary, read.pinned, transcript), lead, quota, write

    def _reread(
        self,
        call: ModelCallInput,
        snapshot: DefinitionSnapshot,
        mcp: dict[str, McpServerCatalog],
        quota: TenantQuota | None,
    ) -> tuple[Framed, _Loaded, list[Event], TenantQuota | None, StepWrite | None]:
        """The context read again once the step's write is made (`quota`: what it read)."""
        framed, loaded, lead, _, _ = self._load(call, snapshot, mcp, [], [], True, defer=True)
        return framed, loaded, lead, quota, None

    def _record_checked(
        self, call: ModelCallInput, messages: list[Message], events: list[Event], resolved: bool
    ) -> TenantQuota | None:
        """Store what the step brings (nothing is left for the final write), its messages'
        content refs resolved first unless `resolved`; the tenant's quota it read.

        The budget ledger, when the call has one, and the tenant's quota are read in the
        same transaction, and a spent quota or budget stores `quota.blocked` instead of
        `model.requested` (the last event) and refuses the call.
        """
        # Only a message queued as a blob has a ref: most steps bring none.
        if not resolved and any(isinstance(m.metadata.get(CONTENT_REF), str) for m in messages):
            messages, events = resolve_content_refs(self._store, messages, events)
        *before, requested = events
        ids = attempt_ids(call, activity.info().attempt)
        root = call.budget_root
        if root is None:  # a history from before budgets: its tenant's quota alone
            quota = self._store.budgets.check(None, call.thread_id, now=datetime.now(UTC)).quota
            blocked = None if quota is None else quota.blocked_payload(call.thread_id)
            if quota is not None and blocked is not None:
                refused = attempt_event(call, ids, "blocked", "quota.blocked", blocked)
                self._store.events.record(messages, [*before, refused])
                raise tenant_quota_exhausted(quota)
            self._store.events.record(messages, events)
            return quota
        checked = self._store.budgets.record_checked(
            root,
            messages,
            before,
            requested,
            now=datetime.now(UTC),
            make_event=lambda suffix, kind, data: attempt_event(call, ids, suffix, kind, data),
        )
        if checked.quota is not None and checked.tenant_spent:
            raise tenant_quota_exhausted(checked.quota)
        if checked.state is not None and checked.refused_by is not None:
            raise budget_exhausted(checked.state, checked.refused_by)
        return checked.quota

    @staticmethod
    def _request(
        call: ModelCallInput,
        model: ModelDef,
        side_frame: Frame,
        window: Window,
        boundary: ContextBoundary | None,
    ) -> tuple[ChatRequest, ContextReport]:
        """The request of a window a hook may have changed, measured anew."""
        budget = limits_of(model, call.window).prompt_budget
        tools, report = request_of(side_frame, window, boundary, model, budget)
        return chat_request(model, side_frame.prompt, window, tools), report

    def _window(
        self,
        call: ModelCallInput,
        model: ModelDef,
        side_frame: Frame,
        boundary: ContextBoundary | None,
        pinned: list[Message],
        history: _History,
    ) -> Window:
        """The window of messages a hook may have changed (kept parts, no kept sums)."""
        return build_window(
            side_frame,
            boundary,
            pinned,
            history,
            side=call.side,
            cap=preview_cap(model, call.window),
            images=image_view(self._store, call.thread_id, model, side_frame.prompt),
            views=self._views,
            thread_id=call.thread_id,
        )


def _writes_beside(
    call: ModelCallInput, messages: list[Message], events: list[Event], resolved: bool
) -> bool:
    """Whether a step's write can be made beside its request: it brings messages of the
    thread's main transcript, none queued as a blob (the write resolves its content), and
    no event that changes a row the call reads (the queue's depth is not one). A prompt
    tool's scoped window is read its own way."""
    if call.scope is not None or not messages:
        return False
    if any(m.thread_id != call.thread_id or m.depth != 0 for m in messages):
        return False
    if not resolved and any(isinstance(m.metadata.get(CONTENT_REF), str) for m in messages):
        return False
    return not changes_rows([e for e in events if e.type != QUEUE_CHANGED])


def _appended(transcript: list[MessageJson], messages: list[Message]) -> list[MessageJson] | None:
    """The texts of `messages` the transcript read does not hold yet (an earlier attempt
    may have stored them), as the transcript cache will read them once stored; None when
    they would not all come after the transcript's last message in its order (position,
    creation, id): the caller then stores first and reads again."""
    held = messages_of(transcript[-len(messages) :]) if transcript else []
    known = {m.id for m in held}
    fresh = sorted(
        (m for m in messages if m.id not in known),
        key=lambda m: (m.position, m.created_at, m.id),
    )
    if fresh and held and held[-1].position >= fresh[0].position:
        return None
    return [message_json(m) for m in fresh]
