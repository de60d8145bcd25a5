"""The AgentThread's in-memory state: queue, message index, counters and event outbox.

Kept apart from the workflow class so the step cycle reads as the spec's seven steps.
Only ids, roles and counters live here; message content lives in the store.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from temporalio import workflow

from contract.actions import ActionResolution, PendingAction
from contract.events import Event
from contract.messages import Message, MessageMeta, QueuedMessage, QueuedTool, Side
from contract.thread import Counters, QueuedItem, UsageTotals

MAX_INCIDENTS = 20


@dataclass
class QueueEntry:
    """One queued message or tool, FIFO."""

    queue_id: str
    turn_id: str
    enqueued_at: str
    message: QueuedMessage | None = None
    tool: QueuedTool | None = None

    def to_item(self) -> QueuedItem:
        """How `thread_read` shows this entry."""
        if self.message is not None:
            return QueuedItem(
                queue_id=self.queue_id,
                kind="message",
                turn_id=self.turn_id,
                role=self.message.role,
                enqueued_at=self.enqueued_at,
            )
        assert self.tool is not None, "an entry holds a message or a tool"
        return QueuedItem(
            queue_id=self.queue_id,
            kind="tool",
            turn_id=self.turn_id,
            tool=self.tool.name,
            enqueued_at=self.enqueued_at,
        )


@dataclass
class ThreadMemory:
    """Everything the workflow remembers between steps (small, content-free)."""

    thread_id: str
    session_id: str | None
    queue: deque[QueueEntry] = field(default_factory=deque)
    outbox: list[Event] = field(default_factory=list)
    outbox_messages: list[Message] = field(default_factory=list)
    index: list[MessageMeta] = field(default_factory=list)
    # Index entries older than `index` (left to the store when the thread continued as new).
    index_base: int = 0
    counters: Counters = field(default_factory=Counters)
    usage: UsageTotals = field(default_factory=UsageTotals)
    warnings: int = 0
    # Human-in-the-loop: pending and resolved actions by id, and session approvals.
    pending_actions: dict[str, PendingAction] = field(default_factory=dict)
    resolved_actions: dict[str, ActionResolution] = field(default_factory=dict)
    session_allowed_tools: set[str] = field(default_factory=set)
    incidents: list[dict[str, Any]] = field(default_factory=list)
    cost_unknown: bool = False

    def incident(self, code: str, message: str, **ids: Any) -> None:
        """Remember a warning or failure for `thread_read` (the most recent only)."""
        entry = {"code": code, "message": message[:500], "at": self.timestamp()}
        entry.update({k: v for k, v in ids.items() if v is not None})
        self.incidents.append(entry)
        del self.incidents[:-MAX_INCIDENTS]

    def now(self) -> datetime:
        """Workflow time: deterministic on replay."""
        return workflow.now()

    def timestamp(self) -> str:
        """ISO-8601 UTC workflow time, as events carry it."""
        return self.now().isoformat().replace("+00:00", "Z")

    def new_id(self, prefix: str) -> str:
        """A replay-safe unique id."""
        return f"{prefix}_{workflow.uuid4().hex}"

    def emit(self, event_type: str, payload: Any = None, **ids: Any) -> Event:
        """Queue a workflow-produced event; it rides on the next activity to the store."""
        event = Event(
            type=event_type,
            event_id=self.new_id("evt"),
            timestamp=self.timestamp(),
            thread_id=self.thread_id,
            session_id=self.session_id,
            payload=payload,
            **ids,
        )
        self.outbox.append(event)
        return event

    def take_outbox(self) -> list[Event]:
        """The events to hand to the next activity; put them back with `return_outbox`."""
        events, self.outbox = self.outbox, []
        return events

    def take_outbox_messages(self) -> list[Message]:
        """Messages the workflow wrote by itself, to persist with the next activity."""
        messages, self.outbox_messages = self.outbox_messages, []
        return messages

    def return_outbox(self, events: list[Event]) -> None:
        """Keep events whose activity failed, ahead of any produced meanwhile."""
        self.outbox = events + self.outbox

    def new_message(
        self,
        *,
        role: Any,
        content: str | None,
        side: Side | None,
        turn_id: str | None,
        message_id: str | None = None,
        **fields: Any,
    ) -> Message:
        """A message with the next position in the thread, indexed here."""
        message = Message(
            id=message_id or self.new_id("msg"),
            thread_id=self.thread_id,
            position=self.counters.messages,
            role=role,
            content=content,
            created_at=int(self.now().timestamp() * 1_000_000),
            side=side,
            turn_id=turn_id,
            **fields,
        )
        self.index_message(message)
        return message

    def reserve_position(self) -> int:
        """Claim the next message position for a message an activity will write."""
        position = self.counters.messages
        self.counters.messages += 1
        return position

    def index_message(self, message: Message) -> None:
        """Remember a message's ids and role (never its content)."""
        if message.position >= self.counters.messages:
            self.counters.messages = message.position + 1
        self.index.append(
            MessageMeta(
                id=message.id,
                position=message.position,
                role=message.role,
                side=message.side,
                turn_id=message.turn_id,
                tool_call_id=message.tool_call_id,
                created_at=message.created_at,
            )
        )

    def queue_snapshot(self) -> list[dict[str, Any]]:
        """The queue as `queue.changed` events describe it."""
        return [entry.to_item().model_dump(by_alias=True) for entry in self.queue]
