"""ThreadState's transcript edits: `inject_message` and `delete_message`.

An injected message is placed by the workflow (it owns message positions) once the tool's
result is stored; a deletion is made in the store at once, with its event, and the
workflow drops the ids from its index afterwards. Neither starts a turn. Standard Agents
has no hook point for deletion (`contract/hooks.py`), so none runs.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from weft.activities.thread_intents import require_intents
from weft.activities.thread_writes import ThreadWrites
from weft.contract.messages import Message
from weft.contract.transcript_edits import InjectedMessage
from weft.contract.validation import describe_validation_error

if TYPE_CHECKING:
    from weft.activities.tool_invoker import ToolInvoker
    from weft.contract.events import Event
    from weft.store import Store

INJECTABLE_ROLES = ("user", "assistant", "system")


class ThreadMessages(ThreadWrites):
    """Transcript edits of ThreadState (Standard Agents `injectMessage`, `deleteMessage`)."""

    _store: Store
    _event_prefix: str
    _intents_from: str | None
    _invoker: ToolInvoker | None
    _counts: Counter[str]
    thread_id: str
    tool_call_id: str | None

    def _intent(self, kind: str, data: dict[str, Any]) -> None: ...

    _event: Callable[[str, str, dict[str, Any]], Event]

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
        self._counts["inject"] += 1
        try:
            message = InjectedMessage(
                message_id=f"msg_{self._event_prefix}:inject{self._counts['inject']}",
                role=role,  # checked above
                content=content,
                silent=silent,
                attachments=attachments or [],
                metadata=metadata or {},
            )
        except ValidationError as err:
            raise ValueError(f"inject_message: {describe_validation_error(err)}") from None
        self._intent("inject_message", message.model_dump(mode="json", by_alias=True))
        return message.message_id

    async def delete_message(self, message_id: str) -> bool:
        """Delete a message from the thread; False when it has no such message.

        Deleting an assistant message also deletes the tool results answering its tool
        calls, so no result is left without its call. A tool result cannot be deleted on
        its own (its call would be left unanswered: delete the assistant message), nor the
        assistant message whose tool call is running now. No hook runs (Standard Agents
        has no delete hook point).
        """
        require_intents("delete_message", self._intents_from)
        current = await asyncio.to_thread(self._store.messages.get, self.thread_id, message_id)
        if current is not None:
            await self._check_deletable(current)
        self._counts["delete"] += 1
        event = self._event(
            "artifact.changed",
            f"delete{self._counts['delete']}",
            {"change": "message.deleted", "messageId": message_id},
        )
        deleted = await self._write(
            self._store.events.delete_message, self.thread_id, message_id, event
        )
        if deleted:
            self._intent("messages_deleted", {"ids": deleted})
        return bool(deleted)

    async def _check_deletable(self, message: Message) -> None:
        running = self._invoker.running_call_id if self._invoker else self.tool_call_id
        if message.role == "tool":
            caller = await asyncio.to_thread(self._caller_of, message.tool_call_id)
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
        for message in self._store.messages.list(self.thread_id):
            if any(call.id == tool_call_id for call in message.tool_calls or []):
                return message
        return None
