"""The hooks of `thread.init`: `after_thread_created` in the new thread, and
`after_subagent_created` in its parent (the parent's hooks, snapshot and ThreadState).

`after_thread_created` is scoped like every hook: side A's prompt's list, else the
agent's. The parent's `after_subagent_created` ids were chosen by the parent when it
spawned the child (`ParentLink.hooks`), since only the parent knows its active prompt.
"""

from __future__ import annotations

import asyncio
from typing import Any

from weft.activities.clock import now_iso
from weft.activities.hooks.registry import HookRegistry, scope_of
from weft.activities.hooks.state import hook_state
from weft.activities.snapshots import SnapshotCache
from weft.activities.tool_state import ThreadState
from weft.contract.activities import ThreadInitInput
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.hooks import HookName
from weft.contract.subagents import ParentLink
from weft.store import Store


async def thread_created(
    registry: HookRegistry,
    store: Store,
    snapshots: SnapshotCache,
    snapshot: DefinitionSnapshot,
    start: ThreadInitInput,
    *,
    attempt: int,
) -> None:
    """Run `after_thread_created` here and the parent's `after_subagent_created` there."""
    data = {
        "threadId": start.thread_id,
        "agent": start.agent,
        "parentThreadId": start.parent.thread_id if start.parent else None,
    }
    await _run_in(
        registry,
        store,
        snapshot,
        scope_of(snapshot, None, "a"),
        "after_thread_created",
        data,
        thread_id=start.thread_id,
        session_id=start.session_id,
        prefix=f"init.a{attempt}",
    )
    parent = start.parent
    if parent is not None and parent.hooks and parent.snapshot_id:
        await _run_in(
            registry,
            store,
            await snapshots.get(parent.snapshot_id),
            parent.hooks,
            "after_subagent_created",
            data,
            thread_id=parent.thread_id,
            session_id=None,
            # The child's id keeps these ids apart from every other child's in the parent.
            prefix=f"{start.thread_id}.spawned.a{attempt}",
            envelope=_in_parent(parent, start.thread_id),
        )


async def _run_in(
    registry: HookRegistry,
    store: Store,
    snapshot: DefinitionSnapshot,
    in_scope: list[str],
    point: HookName,
    data: dict[str, Any],
    *,
    thread_id: str,
    session_id: str | None,
    prefix: str,
    envelope: dict[str, Any] | None = None,
) -> None:
    async def state() -> ThreadState:
        built = await asyncio.to_thread(
            hook_state,
            store,
            snapshot,
            thread_id=thread_id,
            agent=None,
            side="a",
            prompt=None,
            session_id=session_id,
            turn_id=None,
            event_prefix=f"{prefix}:hooks",
            where="thread.init",
        )
        built.use_hooks(runner)
        return built

    def make_event(suffix: str, kind: str, payload: dict[str, Any]) -> Event:
        return Event(
            type=kind,
            event_id=f"{prefix}:{suffix}",
            timestamp=now_iso(),
            thread_id=thread_id,
            session_id=session_id,
            payload=payload,
            **(envelope or {}),
        )

    runner = registry.runner(snapshot, in_scope, state=state, make_event=make_event)
    if runner.has(point):
        await runner.run(point, data)
        await runner.flush()


def _in_parent(parent: ParentLink, child_id: str) -> dict[str, Any]:
    """What the parent's hook events carry: the spawning call and the child."""
    return {"tool_call_id": parent.tool_call_id, "subagent_id": child_id}
