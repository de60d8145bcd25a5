"""The hook points of one `model.call` attempt.

In request order: `before/after_create_message` on the messages the step carries,
`filter_messages` over the stored messages of the window (before projection),
`after_system_message` on the rendered system prompt, `prefilter_llm_history` over the
chat messages just before the request is measured and sent, and the create hooks again
on the assistant's reply. Both filters go through `repair_pairs`: a provider never gets a
tool call without its result, whatever a filter returned.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from functools import cached_property
from typing import Any

from temporalio.exceptions import ApplicationError

from weft.activities.context_window import Frame, Window
from weft.activities.hooks.messages import after_create, before_create, blocked_error
from weft.activities.hooks.pairs import repair_pairs
from weft.activities.hooks.registry import HookRegistry, scope_of
from weft.activities.hooks.runner import EventMaker, HookRunner
from weft.activities.hooks.state import hook_state
from weft.activities.spill import resolve_content_refs
from weft.activities.tool_state import ThreadState
from weft.contract.activities import ModelCallInput
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.store import Store

CHAT_ROLES = ("system", "user", "assistant", "tool")


class ModelHooks:
    """The hooks in scope for one model call (the prompt tool's prompt inside one)."""

    def __init__(
        self,
        registry: HookRegistry,
        store: Store,
        snapshot: DefinitionSnapshot,
        call: ModelCallInput,
        *,
        make_event: EventMaker,
        attempt_id: str,
    ) -> None:
        self._store = store
        self._registry = registry
        self._snapshot = snapshot
        self._make_event = make_event
        self._call = call
        self._event_prefix = f"{attempt_id}:hooks"
        self._prompt = call.scope.prompt if call.scope else None
        # Most agents hook nothing: a snapshot without hooks has none in scope.
        self._in_scope = (
            scope_of(snapshot, call.agent, call.side, self._prompt) if snapshot.hooks else []
        )
        # No hook is in scope: no hook point runs, nothing waits to be written, and the
        # runner is built only if asked for.
        self.idle = not self._in_scope

    @cached_property
    def runner(self) -> HookRunner:
        """The runner of the hooks in scope, with the ThreadState they get built at the
        first hook that runs."""
        store, snapshot, call = self._store, self._snapshot, self._call

        async def state() -> ThreadState:
            built = await asyncio.to_thread(
                hook_state,
                store,
                snapshot,
                thread_id=call.thread_id,
                agent=call.agent,
                side=call.side,
                prompt=self._prompt,
                session_id=call.session_id,
                turn_id=call.turn_id,
                event_prefix=self._event_prefix,
                where="model.call",
            )
            built.use_hooks(runner)  # update_message runs the update hooks too
            return built

        runner = self._registry.runner(
            snapshot, self._in_scope, state=state, make_event=self._make_event
        )
        return runner

    async def new_messages(
        self, messages: list[Message], events: list[Event]
    ) -> tuple[list[Message], list[Event], bool]:
        """The step's new messages as `before_create_message` hooks left them, with the
        events to commit and whether their content refs are resolved already.

        When a hook refuses one, the rest and every event are stored, then the activity
        fails with `hook_blocked` (the workflow ends the turn; the thread goes on).
        """
        if (
            self.idle
            or not messages
            or not self.runner.has("before_create_message", "after_create_message")
        ):
            return messages, events, False
        # The hooks see the whole content of an uploaded message, not its preview.
        messages, events = await asyncio.to_thread(
            resolve_content_refs, self._store, messages, events
        )
        messages, blocks = await before_create(self.runner, messages)
        if blocks:
            taken = [*events, *self.runner.take_events()]
            await asyncio.to_thread(self._store.events.record, messages, taken)
            await self.created(messages)
            raise blocked_error(blocks)
        return messages, [*events, *self.runner.take_events()], True

    async def created(self, messages: list[Message]) -> None:
        """`after_create_message` on messages just stored; their events are written now."""
        if self.idle:
            return
        await after_create(self.runner, messages)
        await self.runner.flush()

    async def reply(self, message: Message) -> tuple[Message | None, ApplicationError | None]:
        """The assistant's reply as `before_create_message` hooks left it; (None, the
        error to raise once everything else is stored) when one refused it."""
        if self.idle:
            return message, None
        kept, blocks = await before_create(self.runner, [message])
        return (kept[0], None) if kept else (None, blocked_error(blocks))

    async def filter_messages(self, messages: list[Message]) -> list[Message]:
        """The window's stored messages as `filter_messages` hooks left them, pairs intact."""
        outcome = await self.runner.run(
            "filter_messages", [m.model_dump(mode="json") for m in messages], check=_stored
        )
        return [Message.model_validate(m) for m in outcome.data]

    async def system_prompt(self, frame: Frame) -> Frame:
        """The frame with the system prompt as `after_system_message` hooks left it."""
        outcome = await self.runner.run(
            "after_system_message",
            {"prompt": frame.prompt.name, "content": frame.system},
            check=_system_text(frame.prompt.name),
        )
        return dataclasses.replace(frame, system=outcome.data["content"])

    async def prefilter(self, window: Window) -> Window:
        """The request's chat messages as `prefilter_llm_history` hooks left them.

        The hooks get a copy: the window's entries are the worker's kept parts
        (message_views.py), shared with later requests. What they return is measured anew.
        """
        if not self.runner.has("prefilter_llm_history"):
            return window
        outcome = await self.runner.run(
            "prefilter_llm_history", copy.deepcopy(window.messages), check=_chat
        )
        return window.changed(outcome.data)


def _messages(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise TypeError("must return a list of message dicts or None")
    return value


def _stored(value: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Stored messages again (validated), repaired so each tool call keeps its result."""
    checked = [Message.model_validate(m).model_dump(mode="json") for m in _messages(value)]
    return repair_pairs(checked)


def _chat(value: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Chat messages (OpenAI shape), repaired so each tool call keeps its result."""
    for i, message in enumerate(_messages(value)):
        if message.get("role") not in CHAT_ROLES:
            raise ValueError(
                f"message [{i}] has role {message.get('role')!r}, not one of {CHAT_ROLES}"
            )
    return repair_pairs(value)


def _system_text(prompt: str) -> Any:
    def check(value: Any) -> tuple[dict[str, Any], list[str]]:
        if not isinstance(value, str):
            raise TypeError(
                f"must return the system prompt as a string or None, not {type(value).__name__}"
            )
        return {"prompt": prompt, "content": value}, []

    return check
