"""The AgentThread workflow's public contract: start input, read model and result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from contract.messages import QueuedMessage
from contract.wire import CamelModel

WORKFLOW_TYPE = "AgentThread"

# Signal, update and query names: a public contract other services send as plain JSON.
SIGNAL_QUEUE_MESSAGE = "queue_message"
SIGNAL_QUEUE_TOOL = "queue_tool"
SIGNAL_TERMINATE = "terminate"
UPDATE_SUBMIT_TURN = "submit_turn"
QUERY_THREAD_READ = "thread_read"
QUERY_MESSAGES = "messages"
SIGNAL_REMOVE_QUEUED_TURN = "remove_queued_turn"
SIGNAL_PROMOTE_QUEUED_TURN = "promote_queued_turn"
QUERY_SESSION_SNAPSHOT = "session_snapshot"

ThreadStatus = Literal[
    "preparing",
    "running",
    "waiting_input",
    "waiting_permission",
    "completed",
    "cancelled",
    "failed",
]

StopReason = Literal[
    "session_stop",
    "session_fail",
    "stop_tool",
    "stop_on_response",
    "max_side_steps",
    "max_total_steps",
    "max_session_turns",
    "awaiting_human",
    "hook_blocked",
    "repeated_tool_error",
    "step_error",
    "aborted_by_user",
]


class ThreadOptions(CamelModel):
    """Runtime limits of one thread."""

    max_total_steps: int = Field(default=64, ge=1, le=10_000, description="hard cap per session")
    model_timeout_seconds: float = Field(default=300, gt=0)
    tool_timeout_seconds: float = Field(default=300, gt=0)
    heartbeat_timeout_seconds: float = Field(
        default=30, gt=0, description="how soon a crashed worker's activity is retried"
    )
    model_max_attempts: int = Field(default=5, ge=1)
    tool_max_attempts: int = Field(default=3, ge=1)


class ParentLink(CamelModel):
    """Who started this thread as a subagent."""

    thread_id: str
    tool_call_id: str | None = None


class ThreadStartInput(CamelModel):
    """The JSON a client starts an `AgentThread` with; the workflow id is the thread id."""

    agent: str = Field(min_length=1)
    messages: list[QueuedMessage] = Field(default_factory=list)
    env: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    user_id: str | None = None
    parent: ParentLink | None = None
    options: ThreadOptions = Field(default_factory=ThreadOptions)


class QueuedItem(CamelModel):
    """One entry of the thread's FIFO queue, as `thread_read` shows it."""

    queue_id: str
    kind: Literal["message", "tool"]
    turn_id: str | None = None
    role: str | None = None
    tool: str | None = None
    enqueued_at: str


class Counters(CamelModel):
    """Step and turn counters; `side_*` count per dual_ai side within the session."""

    steps: int = 0
    session_steps: int = 0
    turns: int = 0
    messages: int = 0
    side_a_steps: int = 0
    side_b_steps: int = 0
    side_a_turns: int = 0
    side_b_turns: int = 0


class UsageTotals(CamelModel):
    """Tokens and cost summed over every model attempt that reported usage."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = Field(default=None, description="None when a model has no price")


class ThreadRead(CamelModel):
    """The thread read model (seed 001 `thread_read_model`), served by query."""

    thread_id: str
    agent: str
    session_id: str | None
    status: ThreadStatus
    active_turn_id: str | None
    active_side: Literal["a", "b"] | None
    queue: list[QueuedItem]
    pending_actions: list[dict[str, Any]]
    children: list[dict[str, Any]]
    counters: Counters
    usage: UsageTotals
    last_outcome: str | None
    stop_reason: StopReason | None
    terminated_at: str | None
    warnings: int
    parent_thread_id: str | None
    incidents: list[dict[str, Any]] = Field(
        default_factory=list, description="recent warnings and failures, newest last"
    )
    permission_state: dict[str, Any] = Field(
        default_factory=dict, description="mode and the tools approved for the session"
    )
    unknown: list[str] = Field(
        default_factory=list, description="facts the thread cannot know, e.g. usage.costUsd"
    )
    updated_at: str | None = None


class ThreadResult(CamelModel):
    """What an `AgentThread` returns when it closes."""

    thread_id: str
    status: ThreadStatus
    stop_reason: StopReason | None
    terminated_at: str | None
    reason: str | None
    counters: Counters
    usage: UsageTotals
