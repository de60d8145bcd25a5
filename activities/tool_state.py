"""ThreadState for function tools: reads go to the store, changes become intents.

A tool never signals its own workflow. `queue_message`, `queue_tool`, `terminate` and
`set_status` are returned with the tool result and applied by the workflow afterwards.
"""

from __future__ import annotations

import asyncio
from typing import Any

from activities.clock import now_iso
from activities.sandbox import CodeExecution, SandboxPool, run_code
from activities.store import Store
from activities.thread_files import ThreadFiles
from activities.thread_hierarchy import ThreadHierarchy
from contract.activities import Intent
from contract.events import Event
from contract.messages import Message
from contract.thread_env import EnvEntry, EnvType


class ThreadState(ThreadFiles, ThreadHierarchy):
    """What a tool can reach of its thread (Standard Agents ThreadState, Python names)."""

    def __init__(
        self,
        *,
        store: Store,
        thread_id: str,
        agent_id: str,
        user_id: str | None,
        session_id: str | None,
        turn_id: str,
        tool_call_id: str,
        env: dict[str, EnvEntry],
        abort: asyncio.Event,
        sandbox: SandboxPool | None = None,
    ) -> None:
        self._store = store
        self.thread_id = thread_id
        self.agent_id = agent_id
        self.user_id = user_id
        self.session_id = session_id
        self.turn_id = turn_id
        self.tool_call_id = tool_call_id
        self._env = env
        self.abort = abort
        self._sandbox = sandbox
        self.intents: list[Intent] = []
        self._emitted = 0

    # -- messages ---------------------------------------------------------------------
    async def get_messages(self, *, limit: int = 100, offset: int = 0) -> list[Message]:
        """A page of the thread's messages, oldest first."""
        messages = await asyncio.to_thread(self._store.messages.list, self.thread_id)
        return messages[offset : offset + limit]

    async def get_message(self, message_id: str) -> Message | None:
        """One message by id, or None."""
        return await asyncio.to_thread(self._store.messages.get, self.thread_id, message_id)

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
        self.intents.append(
            Intent(
                kind="queue_message",
                data={
                    "role": role,
                    "content": content,
                    "silent": silent,
                    "attachments": attachments or [],
                    "metadata": metadata or {},
                },
            )
        )

    # -- tools and lifecycle ------------------------------------------------------------
    def queue_tool(self, name: str, args: dict[str, Any] | None = None) -> None:
        """Schedule a tool call through the normal tool flow."""
        self.intents.append(Intent(kind="queue_tool", data={"name": name, "args": args or {}}))

    def terminate(self, reason: str | None = None) -> None:
        """Ask the thread to shut down softly once this tool's result is stored."""
        self.intents.append(Intent(kind="terminate", data={"reason": reason}))

    def compact(self, reason: str | None = None) -> None:
        """Ask the thread to compact its model context before its next model call."""
        self.intents.append(Intent(kind="compact", data={"reason": reason}))

    def set_status(self, status: str) -> None:
        """Record a status note for the thread (it ends nothing)."""
        self.intents.append(Intent(kind="set_status", data={"status": status}))

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
        record = Event(
            type="run.status",
            event_id=f"{self.tool_call_id}:emit{self._emitted}",
            timestamp=now_iso(),
            thread_id=self.thread_id,
            session_id=self.session_id,
            turn_id=self.turn_id,
            tool_call_id=self.tool_call_id,
            payload={"event": event, "data": data},
        )
        await asyncio.to_thread(self._store.events.append, [record])

    # -- code --------------------------------------------------------------------------
    def run_code(self, source: str, options: dict[str, Any] | None = None) -> CodeExecution:
        """Run JavaScript/TypeScript in the sandbox (Runtime §13); returns the awaitable handle.

        The run is terminated when the thread's execution is aborted: the tool's activity
        is cancelled, for example by `terminate`.
        """
        return run_code(source, options, pool=self._sandbox, abort=self.abort)
