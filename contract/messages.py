"""Messages: what is stored for a thread, and what callers queue into one."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from weft.contract.turns import TurnResult
from weft.contract.wire import CamelModel, SnakeModel

Role = Literal["system", "user", "assistant", "tool"]
QueueableRole = Literal["user", "assistant", "system"]
Side = Literal["a", "b"]

# A queued message travels inside a signal and an activity input; bigger content must be
# uploaded as an attachment. Temporal's own payload limit is 2 MB.
MAX_QUEUED_CONTENT_CHARS = 256 * 1024


class ToolCallFunction(SnakeModel):
    """The function part of an OpenAI-shaped tool call."""

    name: str
    arguments: str = "{}"


class ToolCall(SnakeModel):
    """A tool call as the model returned it, in OpenAI shape."""

    id: str
    type: Literal["function"] = "function"
    function: ToolCallFunction


class Message(SnakeModel):
    """A stored thread message, with the spec's snake_case field names.

    `position` orders messages in the thread and is assigned by the workflow, so every
    write is idempotent and ordered whatever attempt performs it.
    """

    id: str
    thread_id: str
    position: int
    role: Role
    content: str | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    created_at: int = Field(description="microseconds since the epoch")
    status: Literal["pending", "completed", "failed"] = "completed"
    silent: bool = False
    tool_status: Literal["success", "error"] | None = None
    reasoning_content: str | None = None
    parent_id: str | None = None
    depth: int = 0
    attachments: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    side: Side | None = Field(default=None, description="which dual_ai side wrote it")
    turn_id: str | None = None


class QueuedMessage(CamelModel):
    """The `queue_message` signal and `submit_turn` update payload."""

    role: QueueableRole
    content: str = Field(max_length=MAX_QUEUED_CONTENT_CHARS)
    attachments: list[str] = Field(
        default_factory=list, description="paths of files in the thread's filesystem"
    )
    silent: bool = Field(default=False, description="stored and sent to the model, not shown")
    metadata: dict[str, Any] = Field(default_factory=dict)


class SubmitTurnRequest(QueuedMessage):
    """The `submit_turn` payload: a message, and what to do if a turn is running.

    `enqueue` queues it (injected before the next model call); `interrupt` also cancels
    an in-flight model call so the step restarts with it; `reject` refuses it.

    `wait: "completed"` makes the update return only when the turn that reads the message
    ends, with `SubmitTurnResult.turn` (docs/waiting-for-turns.md); `accepted` returns at
    once.
    """

    policy: Literal["enqueue", "interrupt", "reject"] = "enqueue"
    wait: Literal["accepted", "completed"] = "accepted"

    def message(self) -> QueuedMessage:
        """The message itself, without the policy and the wait mode."""
        return QueuedMessage.model_validate(self.model_dump(exclude={"policy", "wait"}))


class QueuedTurnRef(CamelModel):
    """The `remove_queued_turn` and `promote_queued_turn` payload."""

    queue_id: str = Field(min_length=1, max_length=256)


class QueuedTool(CamelModel):
    """The `queue_tool` signal payload: a tool call run through the normal tool flow."""

    name: str = Field(min_length=1, max_length=128)
    args: dict[str, Any] = Field(default_factory=dict)


class InterruptTurnRequest(CamelModel):
    """The `interrupt_turn` update and signal payload (001): stop the running turn.

    `turnId` names the turn to stop (another turn, or none running, is a no-op);
    `sessionId`, when given, must be the thread's session.
    """

    session_id: str | None = Field(default=None, min_length=1, max_length=256)
    turn_id: str | None = Field(default=None, min_length=1, max_length=256)
    reason: str | None = Field(default=None, max_length=4096)


class InterruptTurnResult(CamelModel):
    """What `interrupt_turn` answers: `accepted` (the turn is stopping) or `noop`.

    `turnId` is the turn stopped (or the one named, for a no-op); `reason` is the
    interrupt's reason when accepted, and why nothing happened for a no-op.
    """

    status: Literal["accepted", "noop"]
    turn_id: str | None = None
    reason: str | None = None


class TerminateRequest(CamelModel):
    """The `terminate` signal payload."""

    reason: str | None = Field(default=None, max_length=4096)


class SubmitTurnResult(CamelModel):
    """What `submit_turn` returns: the turn id, and whether it started or waits.

    With `wait: "completed"`, `turn` is how the turn ended (a `rejected` submit has a
    `refused` one at once).
    """

    turn_id: str
    status: Literal["accepted", "queued", "rejected"]
    queue_id: str | None = None
    reason: str | None = None
    turn: TurnResult | None = None


class MessagePage(CamelModel):
    """A page of message metadata returned by the `messages` query."""

    messages: list[MessageMeta]
    next_cursor: int | None = None
    oldest_position: int | None = Field(
        default=None,
        description="the oldest position the thread still indexes; older metadata is "
        "in the store (the index keeps a recent window across continue-as-new)",
    )


class MessageMeta(CamelModel):
    """What the workflow keeps about a message: ids and roles, never content."""

    id: str
    position: int
    role: Role
    side: Side | None = None
    turn_id: str | None = None
    tool_call_id: str | None = None
    created_at: int
    # Inside a prompt tool: the call that ran it, and how deep (0: the main transcript).
    parent_id: str | None = None
    depth: int = 0


MessagePage.model_rebuild()
