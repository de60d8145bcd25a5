"""The worker's hooks, and which of them are in scope for one model or tool call.

The code of a hook lives in the worker (like a function tool's); the thread's snapshot
says which ids exist and which point each hooks. Scoping follows Standard Agents: the
active prompt's `hooks` list replaces the agent's; a hook named nowhere never runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from weft.activities.hooks.runner import EventMaker, HookRunner, StateFactory
from weft.activities.spans import Spans
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.hooks import hook_ids_in_scope
from weft.contract.messages import Side
from weft.definitions.api import FunctionHook
from weft.store import Store


class HookRegistry:
    """The hook functions this worker defines, by id; one runner per activity attempt."""

    def __init__(
        self,
        store: Store,
        functions: Mapping[str, FunctionHook] | None = None,
        *,
        spans: Spans | None = None,
    ) -> None:
        self._store = store
        self._functions = dict(functions or {})
        self._spans = spans

    def runner(
        self,
        snapshot: DefinitionSnapshot,
        in_scope: Sequence[str],
        *,
        state: StateFactory,
        make_event: EventMaker,
    ) -> HookRunner:
        """A runner of the ids `in_scope` that the snapshot knows, writing to the store."""
        return HookRunner(
            self._functions,
            snapshot.hooks,
            in_scope,
            state=state,
            sink=self._write,
            make_event=make_event,
            spans=self._spans,
        )

    async def _write(self, events: list[Event]) -> None:
        await asyncio.to_thread(self._store.events.append, events)


def scope_of(
    snapshot: DefinitionSnapshot, agent: str | None, side: Side, prompt: str | None = None
) -> list[str]:
    """The hook ids in scope: the active prompt's list (`prompt`, else the side's) if it
    has one, else the agent's."""
    agent_def = snapshot.agent_def(agent)
    prompt_def = snapshot.prompts[prompt or agent_def.side(side).prompt]
    ids = hook_ids_in_scope(prompt_def.hooks, agent_def.hooks)
    return [i for i in ids if i in snapshot.hooks]
