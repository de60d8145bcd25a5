"""ThreadState's messages: reads, `update_message`, and the transcript edits `queue_message`,
`inject_message` and `delete_message`.

A queued or injected message is placed by the workflow (it owns message positions) once
the tool's result is stored; an update or deletion is made in the store at once, with its
event, and the workflow drops deleted ids from its index afterwards. Only an injected
message starts no turn. `update_message` runs the message hooks of the activity that built
the state (`use_hooks`); Standard Agents has no hook point for deletion
(`contract/hooks.py`), so none runs.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from weft.activities.hooks.messages import UPDATABLE_FIELDS, before_update
from weft.activities.hooks.runner import HookRunner
from weft.activities.thread_scope import ThreadScope
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.contract.transcript_edits import InjectedMessage
from weft.contract.validation import describe_validation_error

INJECTABLE_ROLES = ("user", "assistant", "system")


class ThreadMessages:
    """The message methods of ThreadState (Standard Agents `getMessages`, `updateMessage`,
    `queueMessage`, `injectMessage`, `deleteMessage`)."""

    def __init__(self, scope: ThreadScope, *, running_call_id: str | None) -> None:
        """`running_call_id`: the model's tool call running now, whose message stays."""
        self._scope = scope
        self._running_call_id = running_call_id
        self.hooks: HookRunner | None = None

    def use_hooks(self, runner: HookRunner) -> None:
        """Run `runner`'s message hooks around `update_message`."""
        self.hooks = runner

    async def get_messages(self, *, limit: int = 100, offset: int = 0) -> list[Message]:
        """A page of the thread's messages, oldest first."""
        scope = self._scope
        messages = await scope.read(scope.store.messages.list, scope.thread_id)
        return messages[offset : offset + limit]

    async def get_message(self, message_id: str) -> Message | None:
        """One message by id, or None."""
        scope = self._scope
        return await scope.read(scope.store.messages.get, scope.thread_id, message_id)

    async def update_message(self, message_id: str, patch: dict[str, Any]) -> Message:
        """Change a message's `content` and/or `metadata`, through the update hooks."""
        scope = self._scope
        unknown = sorted(set(patch) - set(UPDATABLE_FIELDS))
        if unknown:
            raise ValueError(
                f"update_message may change {' and '.join(UPDATABLE_FIELDS)} only, "
                f"not {', '.join(unknown)}"
            )
        current = await self.get_message(message_id)
        if current is None:
            raise KeyError(f"thread {scope.thread_id} has no message {message_id!r}")
        patch = await before_update(self.hooks, current, patch)
        # The Agent Runtime vocabulary has no message class: a stored message is an
        # artifact of the thread, and `change` says what happened to it.
        event = scope.event(
            "artifact.changed",
            f"update{scope.number('update')}",
            {"change": "message.updated", "messageId": message_id, "fields": sorted(patch)},
        )
        pending = self.hooks.take_events() if self.hooks else []
        updated = await scope.write(self._update, message_id, patch, [*pending, event])
        if self.hooks is not None:
            await self.hooks.run(
                "after_update_message",
                updated.model_dump(mode="json"),
                about={"messageId": message_id},
            )
        return updated

    def _update(self, message_id: str, patch: dict[str, Any], events: list[Event]) -> Message:
        scope = self._scope
        *before, event = events
        scope.store.events.append(before)
        updated = scope.store.events.update_message(scope.thread_id, message_id, patch, event)
        if updated is None:
            raise KeyError(f"thread {scope.thread_id} has no message {message_id!r}")
        return updated

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
        self._scope.intents.add(
            "queue_message",
            {
                "role": role,
                "content": content,
                "silent": silent,
                "attachments": attachments or [],
                "metadata": metadata or {},
            },
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
        """Add a message to the transcript without starting a turn; returns its id.

        Unlike `queue_message`, nothing runs because of it: the model reads it with the
        rest of the transcript at its next call. The workflow places it once this tool's
        result is stored (after the step's other tool results, so calls keep their
        results next to them). Roles: user, assistant or system. The id is the same when
        a retried tool injects again, so the message is written once.
        """
        if role not in INJECTABLE_ROLES:
            hint = (
                " (a tool message must answer a tool call, or the transcript breaks; "
                "return the text from your tool instead)"
                if role == "tool"
                else ""
            )
            raise ValueError(
                f"inject_message role must be user, assistant or system, not {role!r}{hint}"
            )
        scope = self._scope
        try:
            message = InjectedMessage(
                message_id=f"msg_{scope.event_prefix}:inject{scope.number('inject')}",
                role=role,  # checked above
                content=content,
                silent=silent,
                attachments=attachments or [],
                metadata=metadata or {},
            )
        except ValidationError as err:
            raise ValueError(f"inject_message: {describe_validation_error(err)}") from None
        scope.intents.add("inject_message", message.model_dump(mode="json", by_alias=True))
        return message.message_id

    async def delete_message(self, message_id: str) -> bool:
        """Delete a message from the thread; False when it has no such message.

        Deleting an assistant message also deletes the tool results answering its tool
        calls, so no result is left without its call. A tool result cannot be deleted on
        its own (its call would be left unanswered: delete the assistant message), nor the
        assistant message whose tool call is running now. No hook runs (Standard Agents
        has no delete hook point).
        """
        scope = self._scope
        scope.intents.require("delete_message")
        current = await scope.read(scope.store.messages.get, scope.thread_id, message_id)
        if current is not None:
            await self._check_deletable(current)
        event = scope.event(
            "artifact.changed",
            f"delete{scope.number('delete')}",
            {"change": "message.deleted", "messageId": message_id},
        )
        deleted = await scope.write(
            scope.store.events.delete_message, scope.thread_id, message_id, event
        )
        if deleted:
            scope.intents.add("messages_deleted", {"ids": deleted})
        return bool(deleted)

    async def _check_deletable(self, message: Message) -> None:
        running = self._running_call_id
        if message.role == "tool":
            caller = await self._scope.read(self._caller_of, message.tool_call_id)
            name = f" {caller.id!r}" if caller else ""
            raise ValueError(
                f"message {message.id!r} is the result of tool call {message.tool_call_id!r}; "
                "deleting it alone would leave the call unanswered: delete the assistant "
                f"message{name} that made the call (its results go with it)"
            )
        calls = {call.id for call in message.tool_calls or []}
        if running is not None and running in calls:
            raise ValueError(
                f"message {message.id!r} holds tool call {running!r}, which is running now; "
                "it can be deleted once the call has its result (from a later tool call)"
            )

    def _caller_of(self, tool_call_id: str | None) -> Message | None:
        """The assistant message that made the call `tool_call_id`, if it is stored."""
        scope = self._scope
        for message in scope.store.messages.list(scope.thread_id):
            if any(call.id == tool_call_id for call in message.tool_calls or []):
                return message
        return None
