"""ThreadState's hierarchy: the subagent registry, parent lookups and reports to the parent.

Reads go to the store (the registry rows are projected from the parent's `subagent.*`
events; the threads the tasks this thread created ran their attempts in are listed after
them, from the tasks' records: store/attempt_threads.py). Changes are intents: the workflow relays them to the parent as `subagent_report`
signals once the tool's result is stored (an activity never signals a workflow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weft.activities.thread_scope import ThreadScope
from weft.store.attempt_threads import attempt_subagents
from weft.store.subagents import SubagentEntry

if TYPE_CHECKING:
    from weft.store import ThreadRow


class ThreadHierarchy:
    """Parent/child methods of ThreadState (Runtime §7.1, §8.2)."""

    def __init__(self, scope: ThreadScope) -> None:
        self._scope = scope

    async def children(self) -> list[SubagentEntry]:
        """This thread's subagent registry: reference, name, status, … per child; then the
        attempt threads of the tasks it created (`tool: "tasks"`, with `taskId`)."""
        scope = self._scope
        registry = await scope.read(scope.store.subagents.list, scope.thread_id)
        return [*registry, *await self._attempts()]

    async def get_child_thread(self, reference: str) -> SubagentEntry | None:
        """A child by reference or name (a task's attempt thread too): its registry entry
        and its thread row, or None."""
        scope = self._scope
        entry = await scope.read(scope.store.subagents.find, scope.thread_id, reference)
        if entry is None:
            entry = next(
                (e for e in await self._attempts() if reference in (e["reference"], e["name"])),
                None,
            )
        if entry is None:
            return None
        row = await scope.read(scope.store.threads.get, str(entry["reference"]))
        return {**entry, "thread": _summary(row)}

    async def arguments(self) -> dict[str, Any]:
        """The arguments this thread was created with as a subagent ({} for a root thread)."""
        scope = self._scope
        own = await scope.read(scope.store.threads.get, scope.thread_id)
        if own is None or not own.parent_thread_id:
            return {}
        entry = await scope.read(scope.store.subagents.find, own.parent_thread_id, scope.thread_id)
        return dict(entry.get("arguments") or {}) if entry else {}

    async def get_parent_thread(self) -> dict[str, str | None] | None:
        """The parent thread's summary (id, agent, status), or None for a root thread."""
        scope = self._scope
        own = await scope.read(scope.store.threads.get, scope.thread_id)
        if own is None or not own.parent_thread_id:
            return None
        parent = await scope.read(scope.store.threads.get, own.parent_thread_id)
        return _summary(parent) or {"threadId": own.parent_thread_id}

    async def _attempts(self) -> list[SubagentEntry]:
        scope = self._scope
        return await scope.read(attempt_subagents, scope.store, scope.thread_id)

    def notify_parent(self, content: str) -> None:
        """Send `content` to the parent thread as a queued message (works with explicit
        parentCommunication too); in a root thread it is recorded as a status note."""
        self._scope.intents.add("notify_parent", {"content": str(content)})


def _summary(row: ThreadRow | None) -> dict[str, str | None] | None:
    if row is None:
        return None
    return {
        "threadId": row.thread_id,
        "agent": row.agent,
        "status": row.status,
        "parentThreadId": row.parent_thread_id,
        "lastOutcome": row.last_outcome,
        "stopReason": row.stop_reason,
    }
