"""ThreadState for function tools and hooks: reads go to the store, changes become intents.

A tool never signals its own workflow. `queue_message`, `queue_tool`, `terminate` and
`set_status` are returned with the tool result and applied by the workflow afterwards.
Hooks get the same ThreadState; outside `tool.call` no result carries intents back, so
there those methods raise (`IntentUnavailable`) instead of being dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, overload

from weft.activities.call_keys import idempotency_key
from weft.activities.hooks.messages import UpdateRefused
from weft.activities.sandbox import CodeExecution, SandboxPool
from weft.activities.thread_code import ThreadCode
from weft.activities.thread_effects import ThreadEffects
from weft.activities.thread_env_state import ThreadEnv
from weft.activities.thread_facts import ThreadFacts
from weft.activities.thread_files import ThreadFiles
from weft.activities.thread_hierarchy import ThreadHierarchy
from weft.activities.thread_intents import IntentSink, IntentUnavailable
from weft.activities.thread_kv import ThreadKv
from weft.activities.thread_messages import ThreadMessages
from weft.activities.thread_scope import ThreadScope
from weft.activities.thread_writes import OwedWrite
from weft.activities.tool_invoker import ToolInvocations, ToolInvoker
from weft.contract.activities import Intent, ToolResult
from weft.contract.definitions import DefinitionSnapshot, PromptDef
from weft.contract.messages import Message
from weft.contract.thread_env import EnvEntry, EnvType, prompt_env
from weft.store import Store
from weft.store.files import FileStat, GrepMatch
from weft.store.subagents import SubagentEntry
from weft.store.thread_env_rows import ThreadEnvRow

if TYPE_CHECKING:
    from weft.activities.hooks.runner import HookRunner
    from weft.definitions import FunctionEffect

__all__ = [
    "IntentUnavailable",
    "ThreadState",
    "UpdateRefused",
    "idempotency_key",
    "thread_state_for",
]


class ThreadState:
    """What a tool can reach of its thread (Standard Agents ThreadState, Python names).

    A façade: each group of methods is a part with state of its own (values, messages,
    files, env, effects, hierarchy, facts, code, invocations), all built over one
    `ThreadScope` (store, ids, intents, write path); the methods here delegate to them.
    """

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
        scope = ThreadScope(
            store=store,
            thread_id=thread_id,
            session_id=session_id,
            turn_id=turn_id,
            tool_call_id=tool_call_id,
            event_prefix=event_prefix or tool_call_id or thread_id,
            intents=IntentSink(intents_from),
        )
        self._compose(scope, agent_id, user_id, env, abort, sandbox, invoker, idempotency_key)

    def _compose(
        self,
        scope: ThreadScope,
        agent_id: str,
        user_id: str | None,
        env: dict[str, EnvEntry],
        abort: asyncio.Event,
        sandbox: SandboxPool | None,
        invoker: ToolInvoker | None,
        idempotency_key: str | None,
    ) -> None:
        self._scope = scope
        self.thread_id = scope.thread_id
        self.agent_id = agent_id
        self.user_id = user_id
        self.session_id = scope.session_id
        self.turn_id = scope.turn_id
        self.tool_call_id = scope.tool_call_id
        # The same for every attempt of this call, on any worker; a tool passes it to an
        # external API so the effect happens once though the tool may run again.
        self.idempotency_key = idempotency_key
        self.abort = abort
        self._kv = ThreadKv(scope)
        self._messages = ThreadMessages(
            scope, running_call_id=invoker.running_call_id if invoker else scope.tool_call_id
        )
        self._files = ThreadFiles(scope)
        self._env = ThreadEnv(scope, env)
        self._effects = ThreadEffects(scope)
        self._hierarchy = ThreadHierarchy(scope)
        self._facts = ThreadFacts(
            scope, has_call=scope.tool_call_id is not None or idempotency_key is not None
        )
        self._code = ThreadCode(scope, sandbox=sandbox, abort=abort)
        self._invocations = ToolInvocations(scope, invoker, state_for=self._invoked_state)

    def _invoked_state(self, scope: ThreadScope, invoker: ToolInvoker) -> ThreadState:
        """The ThreadState of a tool this one invokes: ids of its own (`scope`), the env
        shared (a value it sets is seen here at once), a key made from this call's and
        which invocation it is (the same on a retry, as the caller invokes in order)."""
        nested = ThreadState.__new__(ThreadState)  # over `scope`, not a scope of its own
        key = self.idempotency_key
        if key is not None:
            key = idempotency_key(self.thread_id, f"{key}:{scope.event_prefix}")
        env, sandbox = self._env.entries, self._code.sandbox
        nested._compose(scope, self.agent_id, self.user_id, env, self.abort, sandbox, invoker, key)
        if self._messages.hooks is not None:
            nested.use_hooks(self._messages.hooks)
        return nested

    @property
    def intents(self) -> list[Intent]:
        """The changes this call asked of the workflow, in order (returned with its result)."""
        return self._scope.intents.intents

    @property
    def before_write(self) -> OwedWrite | None:
        """Stores what the running call still owes before this state writes (tool.call)."""
        return self._scope.writes.before_write

    @before_write.setter
    def before_write(self, flush: OwedWrite | None) -> None:
        self._scope.writes.before_write = flush

    def use_hooks(self, runner: HookRunner) -> None:
        """Run the message hooks in scope of the activity that built this state (its
        `update_message` runs `before/after_update_message`)."""
        self._messages.use_hooks(runner)

    def use_effects(self, catalog: Mapping[str, FunctionEffect]) -> None:
        """Check names and arguments against the worker's effects when scheduling."""
        self._effects.use_effects(catalog)

    async def get_messages(self, *, limit: int = 100, offset: int = 0) -> list[Message]:
        """A page of the thread's messages, oldest first."""
        return await self._messages.get_messages(limit=limit, offset=offset)

    async def get_message(self, message_id: str) -> Message | None:
        """One message by id, or None."""
        return await self._messages.get_message(message_id)

    async def update_message(self, message_id: str, patch: dict[str, Any]) -> Message:
        """Change a message's `content` and/or `metadata` (each given field replaces the
        old one). `before_update_message` hooks may rewrite the patch or refuse it
        (`UpdateRefused`); `after_update_message` hooks see the result."""
        return await self._messages.update_message(message_id, patch)

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
        self._messages.queue_message(
            content, role=role, silent=silent, attachments=attachments, metadata=metadata
        )

    def inject_message(
        self,
        content: str,
        *,
        role: str = "user",
        silent: bool = False,
        attachments: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Add a message to the transcript without starting a turn; returns its id (see
        `ThreadMessages.inject_message`)."""
        return self._messages.inject_message(
            content, role=role, silent=silent, attachments=attachments, metadata=metadata
        )

    async def delete_message(self, message_id: str) -> bool:
        """Delete a message, and an assistant message's tool results with it; False when
        the thread has no such message (see `ThreadMessages.delete_message`)."""
        return await self._messages.delete_message(message_id)

    def queue_tool(self, name: str, args: dict[str, Any] | None = None) -> None:
        """Schedule a tool call through the normal tool flow."""
        self._scope.intents.add("queue_tool", {"name": name, "args": args or {}})

    async def invoke_tool(self, name: str, args: dict[str, Any] | None = None) -> ToolResult:
        """Run the function tool `name` with `args` now and return its result (see
        `ToolInvocations.invoke_tool`)."""
        return await self._invocations.invoke_tool(name, args)

    def terminate(self, reason: str | None = None) -> None:
        """Ask the thread to shut down softly once this tool's result is stored."""
        self._scope.intents.add("terminate", {"reason": reason})

    def compact(self, reason: str | None = None) -> None:
        """Ask the thread to compact its model context before its next model call."""
        self._scope.intents.add("compact", {"reason": reason})

    def set_status(self, status: str) -> None:
        """Record a status note for the thread (it ends nothing)."""
        self._scope.intents.add("set_status", {"status": status})

    async def children(self) -> list[SubagentEntry]:
        """This thread's subagent registry: reference, name, status, … per child."""
        return await self._hierarchy.children()

    async def get_child_thread(self, reference: str) -> SubagentEntry | None:
        """A child by reference or name: its registry entry and its thread row, or None."""
        return await self._hierarchy.get_child_thread(reference)

    async def arguments(self) -> dict[str, Any]:
        """The arguments this thread was created with as a subagent ({} for a root thread)."""
        return await self._hierarchy.arguments()

    async def get_parent_thread(self) -> dict[str, str | None] | None:
        """The parent thread's summary (id, agent, status), or None for a root thread."""
        return await self._hierarchy.get_parent_thread()

    def notify_parent(self, content: str) -> None:
        """Send `content` to the parent thread as a queued message (works with explicit
        parentCommunication too); in a root thread it is recorded as a status note."""
        self._hierarchy.notify_parent(content)

    def env(self, name: str) -> Any | None:
        """An env value, secrets included (tools may see secrets; models never do)."""
        return self._env.env(name)

    def env_type(self, name: str) -> EnvType:
        """`text` or `secret`; unknown names are secret, as the spec says."""
        return self._env.env_type(name)

    async def set_env(self, name: str, value: Any, *, type: str = "text") -> None:
        """Set the thread's env value `name`, `text` (model-visible) or `secret` (tools
        only); the highest layer of its env (see `ThreadEnv.set_env`)."""
        await self._env.set_env(name, value, type=type)

    def schedule_effect(
        self, name: str, args: dict[str, Any] | None = None, delay_ms: int = 0
    ) -> str:
        """Schedule the effect `name` to run with `args` in `delay_ms` milliseconds; its id
        (see `ThreadEffects.schedule_effect`)."""
        return self._effects.schedule_effect(name, args, delay_ms)

    async def get_scheduled_effects(self, name: str | None = None) -> list[dict[str, Any]]:
        """Pending effects, soonest first: `{id, name, args, scheduledAt, createdAt}` each."""
        return await self._effects.get_scheduled_effects(name)

    async def remove_scheduled_effect(self, effect_id: str) -> bool:
        """Cancel a pending effect (its timer too); False when no such effect is pending."""
        return await self._effects.remove_scheduled_effect(effect_id)

    async def get_value(self, key: str) -> Any | None:
        """The value stored under `key` for this thread, or None."""
        return await self._kv.get_value(key)

    async def set_value(self, key: str, value: Any) -> None:
        """Store `value` durably under `key`; None deletes it."""
        await self._kv.set_value(key, value)

    async def emit(self, event: str, data: Any = None) -> None:
        """Record a custom fact as a `run.status` event carrying the tool's name for it."""
        await self._facts.emit(event, data)

    async def progress(
        self, message: str, *, fraction: float | None = None, data: Any = None
    ) -> None:
        """Report how far the running call has come: a `tool.progress` event of this tool
        call (of this effect, from an effect: written with its outcome, as all its writes).
        `fraction` is the share done, 0 to 1, when the tool knows it."""
        await self._facts.progress(message, fraction=fraction, data=data)

    async def record_redacted(self, field: str, values: int) -> None:
        """Record `output.redacted`: `values` occurrences of secret values were masked in
        `field` of this call's output before anyone saw it (weft's MCP path calls it; the
        values themselves are never written)."""
        await self._facts.record_redacted(field, values)

    async def write_file(
        self, path: str, content: bytes | str, *, mime_type: str | None = None
    ) -> FileStat:
        """Create or replace a file (text is stored as UTF-8), creating missing parents."""
        return await self._files.write_file(path, content, mime_type=mime_type)

    @overload
    async def read_file(self, path: str) -> bytes: ...
    @overload
    async def read_file(self, path: str, *, encoding: str) -> str: ...
    async def read_file(self, path: str, *, encoding: str | None = None) -> bytes | str:
        """A file's bytes, or its text when `encoding` is given."""
        return await self._files.read_file(path, encoding=encoding)

    async def stat_file(self, path: str) -> FileStat | None:
        """A file's or directory's kind, size, type and times; None when nothing is there."""
        return await self._files.stat_file(path)

    async def readdir_file(self, path: str = "/") -> list[FileStat]:
        """The entries directly inside a directory, sorted by name."""
        return await self._files.readdir_file(path)

    async def unlink_file(self, path: str) -> None:
        """Remove a file."""
        await self._files.unlink_file(path)

    async def mkdir_file(self, path: str, *, parents: bool = True) -> FileStat:
        """Create a directory; by default with its parents, and an existing one is fine."""
        return await self._files.mkdir_file(path, parents=parents)

    async def rmdir_file(self, path: str, *, recursive: bool = False) -> None:
        """Remove an empty directory, or with `recursive` everything below it too."""
        await self._files.rmdir_file(path, recursive=recursive)

    async def find_files(self, pattern: str) -> list[str]:
        """Paths matching a glob: `*.png` matches names anywhere, `/img/**` whole paths."""
        return await self._files.find_files(pattern)

    async def grep_files(
        self, pattern: str, path_glob: str | None = None, *, max_matches: int = 1000
    ) -> list[GrepMatch]:
        """Lines of the thread's text files matching a regex, optionally of some paths."""
        return await self._files.grep_files(pattern, path_glob, max_matches=max_matches)

    def run_code(self, source: str, options: dict[str, Any] | None = None) -> CodeExecution:
        """Run JavaScript/TypeScript in the sandbox (Runtime §13); the awaitable handle.
        The run stops when the call is aborted (its activity cancelled: `terminate`)."""
        return self._code.run_code(source, options)


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
