"""ThreadState for function tools and hooks: reads go to the store, changes become intents.

A tool never signals its own workflow. `queue_message`, `queue_tool`, `terminate` and
`set_status` are returned with the tool result and applied by the workflow afterwards.
Hooks get the same ThreadState; outside `tool.call` no result carries intents back, so
there those methods raise (`IntentUnavailable`) instead of being dropped.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import Counter
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

from weft.activities.clock import now_iso
from weft.activities.hooks.messages import UPDATABLE_FIELDS, UpdateRefused, before_update
from weft.activities.sandbox import CodeExecution, SandboxFact, SandboxPool, run_code
from weft.activities.thread_effects import EffectChanges, ThreadEffects
from weft.activities.thread_env_state import ThreadEnvState
from weft.activities.thread_files import ThreadFiles
from weft.activities.thread_hierarchy import ThreadHierarchy
from weft.activities.thread_intents import IntentUnavailable
from weft.activities.thread_messages import ThreadMessages
from weft.activities.thread_writes import ThreadWrites
from weft.activities.tool_invoker import ToolInvoker, ToolInvoking
from weft.contract.activities import Intent
from weft.contract.definitions import DefinitionSnapshot, PromptDef
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.contract.thread_env import EnvEntry, EnvType, prompt_env
from weft.store import Store
from weft.store.thread_env_rows import ThreadEnvRow

if TYPE_CHECKING:
    from weft.activities.hooks.runner import HookRunner

__all__ = [
    "IntentUnavailable",
    "ThreadState",
    "UpdateRefused",
    "idempotency_key",
    "thread_state_for",
]


class ThreadState(
    ThreadFiles,
    ThreadHierarchy,
    ThreadEffects,
    ThreadMessages,
    ThreadEnvState,
    ToolInvoking,
    ThreadWrites,
):
    """What a tool can reach of its thread (Standard Agents ThreadState, Python names)."""

    def __init__(
        self,
        *,
        store: Store,
        thread_id: str,
        agent_id: str,
        user_id: str | None,
        session_id: str | None,
        turn_id: str | None,
        tool_call_id: str | None,
        env: dict[str, EnvEntry],
        abort: asyncio.Event,
        sandbox: SandboxPool | None = None,
        event_prefix: str | None = None,
        intents_from: str | None = None,
        invoker: ToolInvoker | None = None,
        idempotency_key: str | None = None,
    ) -> None:
        """`event_prefix` names the events this state writes (default: the tool call id);
        `intents_from` says where intents cannot be applied (None: they can); `invoker`
        runs `invoke_tool` (None where no worker tools are at hand: hooks);
        `idempotency_key` is the running call's (None outside a tool call or effect)."""
        self._store = store
        self.thread_id = thread_id
        self.agent_id = agent_id
        self.user_id = user_id
        self.session_id = session_id
        self.turn_id = turn_id
        self.tool_call_id = tool_call_id
        # The same for every attempt of this call, on any worker; a tool passes it to an
        # external API so the effect happens once though the tool may run again.
        self.idempotency_key = idempotency_key
        self._env = env
        self.abort = abort
        self._sandbox = sandbox
        self.intents: list[Intent] = []
        self._event_prefix = event_prefix or tool_call_id or thread_id
        self._intents_from = intents_from
        self._emitted = 0
        self._updates = 0
        self._hooks: HookRunner | None = None
        self._effect_changes = EffectChanges()
        self._invoker = invoker
        self._counts: Counter[str] = Counter()  # per-kind call numbers: deterministic ids

    # -- messages ---------------------------------------------------------------------
    async def get_messages(self, *, limit: int = 100, offset: int = 0) -> list[Message]:
        """A page of the thread's messages, oldest first."""
        messages = await asyncio.to_thread(self._store.messages.list, self.thread_id)
        return messages[offset : offset + limit]

    async def get_message(self, message_id: str) -> Message | None:
        """One message by id, or None."""
        return await asyncio.to_thread(self._store.messages.get, self.thread_id, message_id)

    def use_hooks(self, runner: HookRunner) -> None:
        """Run the message hooks in scope of the activity that built this state (its
        `update_message` runs `before/after_update_message`)."""
        self._hooks = runner

    async def update_message(self, message_id: str, patch: dict[str, Any]) -> Message:
        """Change a message's `content` and/or `metadata` (each given field replaces the
        old one). `before_update_message` hooks may rewrite the patch or refuse it
        (`UpdateRefused`); `after_update_message` hooks see the result."""
        unknown = sorted(set(patch) - set(UPDATABLE_FIELDS))
        if unknown:
            raise ValueError(
                f"update_message may change {' and '.join(UPDATABLE_FIELDS)} only, "
                f"not {', '.join(unknown)}"
            )
        current = await self.get_message(message_id)
        if current is None:
            raise KeyError(f"thread {self.thread_id} has no message {message_id!r}")
        patch = await before_update(self._hooks, current, patch)
        self._updates += 1
        # The Agent Runtime vocabulary has no message class: a stored message is an
        # artifact of the thread, and `change` says what happened to it.
        event = self._event(
            "artifact.changed",
            f"update{self._updates}",
            {"change": "message.updated", "messageId": message_id, "fields": sorted(patch)},
        )
        pending = self._hooks.take_events() if self._hooks else []
        updated = await self._write(self._update, message_id, patch, [*pending, event])
        if self._hooks is not None:
            await self._hooks.run(
                "after_update_message",
                updated.model_dump(mode="json"),
                about={"messageId": message_id},
            )
        return updated

    def _update(self, message_id: str, patch: dict[str, Any], events: list[Event]) -> Message:
        *before, event = events
        self._store.events.append(before)
        updated = self._store.events.update_message(self.thread_id, message_id, patch, event)
        if updated is None:
            raise KeyError(f"thread {self.thread_id} has no message {message_id!r}")
        return updated

    def _intent(self, kind: str, data: dict[str, Any]) -> None:
        if self._intents_from is not None:
            raise IntentUnavailable(
                f"{kind} is not available to hooks in {self._intents_from}: nothing there "
                "carries it back to the workflow (use it from a tool, or from a tool.call hook)"
            )
        self.intents.append(Intent.model_validate({"kind": kind, "data": data}))

    def queue_message(
        self,
        content: str,
        *,
        role: str = "user",
        silent: bool = False,
        attachments: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Queue a message; the workflow injects it before the next model call."""
        self._intent(
            "queue_message",
            {
                "role": role,
                "content": content,
                "silent": silent,
                "attachments": attachments or [],
                "metadata": metadata or {},
            },
        )

    # -- tools and lifecycle ------------------------------------------------------------
    def queue_tool(self, name: str, args: dict[str, Any] | None = None) -> None:
        """Schedule a tool call through the normal tool flow."""
        self._intent("queue_tool", {"name": name, "args": args or {}})

    def terminate(self, reason: str | None = None) -> None:
        """Ask the thread to shut down softly once this tool's result is stored."""
        self._intent("terminate", {"reason": reason})

    def compact(self, reason: str | None = None) -> None:
        """Ask the thread to compact its model context before its next model call."""
        self._intent("compact", {"reason": reason})

    def set_status(self, status: str) -> None:
        """Record a status note for the thread (it ends nothing)."""
        self._intent("set_status", {"status": status})

    def _invoked_state(self, invocation: str, invoker: ToolInvoker) -> ToolInvoking:
        """The invoked tool's ThreadState, with a key of its own: its caller's and which
        invocation it is (both the same on a retry, as the caller invokes in order)."""
        nested = super()._invoked_state(invocation, invoker)
        if isinstance(nested, ThreadState) and self.idempotency_key is not None:
            nested.idempotency_key = idempotency_key(
                self.thread_id, f"{self.idempotency_key}:{invocation}"
            )
        return nested

    # -- env --------------------------------------------------------------------------
    def env(self, name: str) -> Any | None:
        """An env value, secrets included (tools may see secrets; models never do)."""
        entry = self._env.get(name)
        return entry.value if entry else None

    def env_type(self, name: str) -> EnvType:
        """`text` or `secret`; unknown names are secret, as the spec says."""
        entry = self._env.get(name)
        return entry.type if entry else "secret"

    # -- key-value store (Runtime §14) -------------------------------------------------
    async def get_value(self, key: str) -> Any | None:
        """The value stored under `key` for this thread, or None."""
        return await asyncio.to_thread(self._store.values.get, self.thread_id, key)

    async def set_value(self, key: str, value: Any) -> None:
        """Store `value` durably under `key`; None deletes it."""
        await asyncio.to_thread(self._store.values.set, self.thread_id, key, value)

    # -- events -----------------------------------------------------------------------
    async def emit(self, event: str, data: Any = None) -> None:
        """Record a custom fact as a `run.status` event carrying the tool's name for it."""
        self._emitted += 1
        record = self._event("run.status", f"emit{self._emitted}", {"event": event, "data": data})
        await self._write(self._store.events.append, [record])

    async def progress(
        self, message: str, *, fraction: float | None = None, data: Any = None
    ) -> None:
        """Report how far the running call has come: a `tool.progress` event of this tool
        call (of this effect, from an effect: written with its outcome, as all its writes).
        `fraction` is the share done, 0 to 1, when the tool knows it."""
        if self.tool_call_id is None and self.idempotency_key is None:
            # A hook's state: no running tool call or effect that the progress is of.
            raise RuntimeError(
                "progress is available to tools and effects, not hooks: a hook runs for "
                "no tool call of its own"
            )
        if not isinstance(message, str) or not message:
            raise ValueError("progress: `message` must be a non-empty string")
        if fraction is not None and not (
            isinstance(fraction, int | float) and 0.0 <= fraction <= 1.0
        ):
            raise ValueError(f"progress: `fraction` must be a number from 0 to 1, not {fraction!r}")
        self._counts["progress"] += 1
        payload: dict[str, Any] = {"message": message, "fraction": fraction, "data": data}
        record = self._event("tool.progress", f"progress{self._counts['progress']}", payload)
        await self._write(self._store.events.append, [record])

    async def record_redacted(self, field: str, values: int) -> None:
        """Record `output.redacted`: `values` occurrences of secret values were masked in
        `field` of this call's output before anyone saw it (weft's MCP path calls it; the
        values themselves are never written)."""
        self._counts["redacted"] += 1
        payload = {"field": field, "occurrences": values}
        record = self._event("output.redacted", f"redacted{self._counts['redacted']}", payload)
        await self._write(self._store.events.append, [record])

    def _event(self, event_type: str, suffix: str, payload: dict[str, Any]) -> Event:
        """An event of this tool call, its id unique per call and kind of write."""
        return Event(
            type=event_type,
            event_id=f"{self._event_prefix}:{suffix}",
            timestamp=now_iso(),
            thread_id=self.thread_id,
            session_id=self.session_id,
            turn_id=self.turn_id,
            tool_call_id=self.tool_call_id,
            payload=payload,
        )

    # -- code --------------------------------------------------------------------------
    def run_code(self, source: str, options: dict[str, Any] | None = None) -> CodeExecution:
        """Run JavaScript/TypeScript in the sandbox (Runtime §13); returns the awaitable handle.

        The run is terminated when the thread's execution is aborted: the tool's activity
        is cancelled, for example by `terminate`.
        """
        self._counts["code"] += 1
        run = self._counts["code"]  # numbered at start: a retried tool numbers runs alike

        async def record(facts: list[SandboxFact]) -> None:
            # The run's sandbox.applied / sandbox.violation (activities/sandbox/_facts.py).
            events = [self._event(kind, f"code{run}:{end}", data) for end, kind, data in facts]
            await self._write(self._store.events.append, events)

        return run_code(source, options, pool=self._sandbox, abort=self.abort, observe=record)


def thread_state_for(
    store: Store,
    snapshot: DefinitionSnapshot,
    *,
    thread_id: str,
    agent: str | None,
    prompt: PromptDef,
    session_id: str | None,
    turn_id: str | None,
    tool_call_id: str | None = None,
    event_prefix: str | None = None,
    intents_from: str | None = None,
    sandbox: SandboxPool | None = None,
    invoker: ToolInvoker | None = None,
    env_version: Hashable | None = None,
    env_row: ThreadEnvRow | None = None,
    idempotency_key: str | None = None,
) -> ThreadState:
    """The ThreadState a tool, hook or effect of `prompt` gets: the thread row's user and
    env merged over the agent's and the prompt's (Runtime §4). Reads the row (blocking)
    unless given it (`env_row`) or this worker kept what it read of it at `env_version`
    (store/thread_env_rows.py)."""
    row = env_row or store.threads.env_row(thread_id, env_version)
    agent_def = snapshot.agent_def(agent)
    return ThreadState(
        store=store,
        thread_id=thread_id,
        agent_id=agent_def.name,
        user_id=row.user_id if row else None,
        session_id=session_id,
        turn_id=turn_id,
        tool_call_id=tool_call_id,
        env=prompt_env(prompt, agent_def, row.env if row else None),
        abort=asyncio.Event(),
        sandbox=sandbox,
        event_prefix=event_prefix,
        intents_from=intents_from,
        invoker=invoker,
        idempotency_key=idempotency_key,
    )


def idempotency_key(thread_id: str, anchor: str) -> str:
    """The idempotency key of one call in `thread_id`: `anchor` names the call by ids the
    workflow fixed when it scheduled it (docs/thread-state.md, `idempotency_key`).

    Hashed: thread ids may be long or hold any character, and an external API takes a
    short, header-safe key (Stripe's `Idempotency-Key` at most 255 characters).
    """
    digest = hashlib.sha256(f"{thread_id}\n{anchor}".encode()).hexdigest()
    return f"weft-{digest[:32]}"
