"""The AgentThread workflow's public contract: start input, read model and result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from weft.contract.budget import Budget, BudgetState
from weft.contract.carry_parts import (
    ActionBook,
    EffectBook,
    SubagentBook,
    flat_parts,
    nest_flat_parts,
)
from weft.contract.context import ContextOptions
from weft.contract.context_state import ContextState
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.forks import ForkLink
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Message, MessageMeta, QueuedMessage, QueuedTool, Side
from weft.contract.subagents import ParentLink
from weft.contract.tenants import TenantName
from weft.contract.turns import StopReason as StopReason
from weft.contract.turns import TurnsCarry
from weft.contract.turns import UsageTotals as UsageTotals
from weft.contract.wire import CamelModel

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
# Both an update (answered `accepted` / `noop`) and a signal (fire and forget).
UPDATE_INTERRUPT_TURN = "interrupt_turn"
SIGNAL_INTERRUPT_TURN = "interrupt_turn"

ThreadStatus = Literal[
    "preparing",
    "running",
    "waiting_input",
    "waiting_permission",
    "completed",
    "cancelled",
    "failed",
]


# The session's status (001's thread status words) for a root thread's status; None while
# it prepares. `waiting_input` is idle, or blocked on a person when a turn is running.
SessionStatus = Literal["idle", "running", "blocked", "completed", "failed", "cancelled"]


def session_status(status: ThreadStatus, turn_running: bool) -> SessionStatus | None:
    """What `session.updated` says for a root thread whose status is now `status`."""
    if status == "waiting_input":
        return "blocked" if turn_running else "idle"
    if status == "waiting_permission":
        return "blocked"
    return None if status == "preparing" else status


# A timeout or attempt count past what Temporal can hold (1e300 s) would fail every workflow
# task of the thread, a thread stuck instead of refused: the start input bounds them.
MAX_OPTION_SECONDS = 24 * 3600.0
MAX_OPTION_ATTEMPTS = 1000


class ThreadOptions(CamelModel):
    """Runtime limits of one thread."""

    max_total_steps: int = Field(default=64, ge=1, le=10_000, description="hard cap per session")
    model_timeout_seconds: float = Field(default=300, gt=0, le=MAX_OPTION_SECONDS)
    tool_timeout_seconds: float = Field(default=300, gt=0, le=MAX_OPTION_SECONDS)
    heartbeat_timeout_seconds: float = Field(
        default=3,
        gt=0,
        le=MAX_OPTION_SECONDS,
        description="how soon a crashed worker's activity is retried; a Temporal outage "
        "longer than this retries in-flight activities too (docs/recovery.md)",
    )
    model_max_attempts: int = Field(default=5, ge=1, le=MAX_OPTION_ATTEMPTS)
    tool_max_attempts: int = Field(default=3, ge=1, le=MAX_OPTION_ATTEMPTS)
    continue_as_new_events: int = Field(
        default=4000,
        ge=20,
        le=40_000,
        description="continue as new at the next safe point once a run's history has this "
        "many events (Temporal's hard limit is 51,200)",
    )
    continue_as_new_bytes: int = Field(
        default=4 * 1024 * 1024,
        ge=64 * 1024,
        le=40 * 1024 * 1024,
        description="the same, by history size in bytes (Temporal's hard limit is 50 MB)",
    )
    continue_as_new_idle_seconds: float | None = Field(
        default=900,
        ge=1,
        le=MAX_OPTION_SECONDS,
        description="an idle run whose history grew by a turn or more continues as new "
        "after this many quiet seconds, so a later wake replays a short history, not the "
        "run's; None: only by length (docs/long-threads.md)",
    )
    payload_budget_bytes: int = Field(
        default=1536 * 1024,
        ge=16 * 1024,
        le=1900 * 1024,
        description="the largest encoded payload the thread schedules (Temporal's limit is "
        "2 MB); bigger ones become typed errors",
    )
    context: ContextOptions = Field(
        default_factory=ContextOptions,
        description="token budgets, previews of large outputs and compaction",
    )
    budget: Budget | None = Field(
        default=None,
        description="hard caps on what this thread and its subagents spend (contract/budget.py)",
    )


class ThreadStartInput(CamelModel):
    """The JSON a client starts an `AgentThread` with; the workflow id is the thread id."""

    agent: str = Field(min_length=1)
    messages: list[QueuedMessage] = Field(default_factory=list)
    env: dict[str, Any] = Field(default_factory=dict)
    session_id: str | None = None
    user_id: str | None = None
    parent: ParentLink | None = None
    arguments: dict[str, Any] = Field(
        default_factory=dict, description="a subagent's creation arguments (ThreadState.arguments)"
    )
    scoped_env_request: str | None = Field(
        default=None,
        description="a §7.5 variable request whose stored values join this thread's env",
    )
    options: ThreadOptions = Field(default_factory=ThreadOptions)
    budget_root: str | None = Field(
        default=None,
        description="set for subagents: the thread whose budget ledger this tree spends from",
    )
    # None is `default`; left out of the wire then, so a thread without one starts (and
    # starts its subagents) with the input it always had.
    tenant: TenantName | None = Field(
        default=None,
        description="the tenant the thread belongs to (docs/tenants.md); subagents inherit it",
    )
    carry_over: ThreadCarryOver | None = Field(
        default=None, description="set by the thread itself when it continues as new"
    )


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
    runs: int = Field(default=1, description="workflow runs so far (continue-as-new)")
    env_writes: int = Field(
        default=0, description="thread env values tools have set (set_env intents applied)"
    )


class AgentInfo(CamelModel):
    """What a client shows of the agent running a thread: its definition's display fields."""

    name: str
    title: str | None = None
    description: str | None = None
    icon: str | None = None
    side_labels: dict[str, str] = Field(
        default_factory=dict, description="each side's `label`, by side (a, b)"
    )


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
    context: dict[str, Any] | None = Field(
        default=None,
        description="the model context: estimated tokens of the last request against the "
        "budget, compactions and the latest boundary (without its summary)",
    )
    agent_info: AgentInfo | None = Field(
        default=None, description="the running agent's title, description, icon, side labels"
    )
    budget: BudgetState | None = Field(
        default=None, description="the tree's budget against its spend; None without limits"
    )
    scheduled_effects: list[dict[str, Any]] = Field(
        default_factory=list,
        description="pending scheduled effects, soonest first; `due` when its timer fired "
        "and it waits for the running step to end",
    )
    forked_from: ForkLink | None = Field(
        default=None, description="the thread and point this fork was taken from (a fork)"
    )
    successor_thread_id: str | None = Field(
        default=None, description="the thread that took over when this one was rewound"
    )
    definitions_digest: str | None = Field(
        default=None,
        description="the digest of the definitions the thread runs with (docs/deploys.md); "
        "None while it is preparing",
    )


class ThreadResult(CamelModel):
    """What an `AgentThread` returns when it closes."""

    thread_id: str
    status: ThreadStatus
    stop_reason: StopReason | None
    terminated_at: str | None
    reason: str | None
    counters: Counters
    usage: UsageTotals


class QueueEntry(CamelModel):
    """One queued message or tool, FIFO; carried into the next run as it is."""

    queue_id: str
    turn_id: str
    enqueued_at: str
    message: QueuedMessage | None = None
    tool: QueuedTool | None = None

    def to_item(self) -> QueuedItem:
        """How `thread_read` shows this entry."""
        if self.tool is not None:
            return QueuedItem(
                queue_id=self.queue_id,
                kind="tool",
                turn_id=self.turn_id,
                tool=self.tool.name,
                enqueued_at=self.enqueued_at,
            )
        return QueuedItem(
            queue_id=self.queue_id,
            kind="message",
            turn_id=self.turn_id,
            role=self.message.role if self.message else None,
            enqueued_at=self.enqueued_at,
        )


class TurnCursor(CamelModel):
    """A turn that continued as new between two of its steps, so the next run resumes it."""

    side: Side
    turn_id: str
    side_steps: int = Field(ge=0, description="steps the side took in this turn so far")


class ThreadCarryOver(CamelModel):
    """What a thread carries into its next run when it continues as new.

    Content stays in the store; this holds the queue (with its messages), ids, counters
    and the definitions snapshot, which is never taken again. The message index is the
    most recent window only; older metadata is in the store.
    """

    snapshot: DefinitionSnapshot
    status: ThreadStatus
    queue: list[QueueEntry] = Field(default_factory=list)
    index: list[MessageMeta] = Field(default_factory=list)
    index_base: int = Field(default=0, ge=0, description="index entries left to the store")
    counters: Counters = Field(default_factory=Counters)
    usage: UsageTotals = Field(default_factory=UsageTotals)
    cost_unknown: bool = False
    warnings: int = 0
    incidents: list[dict[str, Any]] = Field(default_factory=list)
    actions: ActionBook = Field(default_factory=ActionBook, description="flat on the wire")
    subagents: SubagentBook = Field(default_factory=SubagentBook, description="flat on the wire")
    active_agent: str | None = Field(default=None, description="set by a handoff")
    stop_reason: StopReason | None = None
    last_outcome: str | None = None
    terminated_at: str | None = None
    terminate_reason: str | None = None
    turn: TurnCursor | None = None
    context: ContextState | None = Field(default=None, description="the context window state")
    turns: TurnsCarry | None = Field(
        default=None, description="recent turn results (None in histories before them)"
    )
    effect_book: EffectBook = Field(default_factory=EffectBook, description="flat on the wire")
    outbox: list[Event] = Field(
        default_factory=list,
        description="events not yet stored (signals that came during the last write); the "
        "next run stores them first",
    )
    outbox_messages: list[Message] = Field(
        default_factory=list, description="messages not yet stored, likewise"
    )
    budget: BudgetState | None = Field(
        default=None, description="the tree's budget as last reported to this thread"
    )
    mcp: McpBook = Field(default_factory=McpBook, description="flat on the wire")
    definitions_upgrade: bool = Field(
        default=False, description="`upgrade_definitions` asked, to be done at the next turn"
    )
    continued_from: ContinuedFrom | None = Field(
        default=None,
        description="the run this one continues, for the new run to record the transition "
        "(None when the previous run recorded it itself, as runs before this field did)",
    )

    @model_validator(mode="before")
    @classmethod
    def _nest_parts(cls, data: Any) -> Any:
        return nest_flat_parts(data, FLAT_PARTS) if isinstance(data, dict) else data

    @model_serializer(mode="wrap")
    def _flatten_parts(self, write: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return flat_parts(write(self), FLAT_PARTS)


# Parts carried as they are, whose fields are flat in `ThreadCarryOver`'s JSON
# (contract/carry_parts.py): by the carry-over's field that holds each.
FLAT_PARTS: dict[str, type[BaseModel]] = {
    "actions": ActionBook,
    "subagents": SubagentBook,
    "effect_book": EffectBook,
    "mcp": McpBook,
}


# `thread.updated {continuedAsNew: {reason}}` of a run that continued because it was idle.
REASON_IDLE = "idle"


class ContinuedFrom(CamelModel):
    """The run a continued run follows, as the new run records it: only the run that
    exists can say a transition happened (a continue-as-new can still be refused)."""

    run: int = Field(description="the previous run's number, from 1")
    run_id: str = Field(description="the previous run's Temporal run id")
    history_events: int
    history_bytes: int
    carry_over_bytes: int
    upgraded: bool = Field(
        default=False,
        description="the previous run continued as new because its worker deployment's "
        "target version changed (docs/deploys.md)",
    )
    build_id: str | None = Field(
        default=None, description="the build id the previous run ran on (None: unversioned)"
    )
    idle: bool = Field(
        default=False,
        description="the previous run continued as new because it stayed idle "
        "(`continue_as_new_idle_seconds`), not because its history was long",
    )


ThreadCarryOver.model_rebuild()
ThreadStartInput.model_rebuild()
