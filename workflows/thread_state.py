"""The AgentThread's one state object: lifecycle, queue, message index, counters, outbox.

`ThreadMemory` is created once the start input is valid and is never optional after
that. It holds each part's state (the queue, the books, the context window) and the
thread's own fields; the parts are handed narrow views of it (`workflows/views.py` and a
`Protocol` in each part's module). All of it is carried across continue-as-new, each
part's state as it is (`workflows/continuation.py`); the outbox is flushed before a run
ends, and only what arrives during that write is carried with it. Only ids, roles and
counters live here; message content lives in the store.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from temporalio import workflow

from weft.contract.budget import BudgetState
from weft.contract.carry_parts import ActionBook, EffectBook, SubagentBook
from weft.contract.context_state import ContextState
from weft.contract.correlation import default_session_id
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.definitions_version import snapshot_digest
from weft.contract.events import Event
from weft.contract.mcp_book import McpBook
from weft.contract.messages import Message, MessageMeta, Role, Side
from weft.contract.thread import (
    Counters,
    QueueEntry,
    StopReason,
    ThreadStartInput,
    ThreadStatus,
    UsageTotals,
)
from weft.contract.thread_ids import thread_id
from weft.workflows.correlation import run_correlation
from weft.workflows.history_gauge import HistoryGauge
from weft.workflows.open_calls import OpenCalls
from weft.workflows.thread_stop import ThreadStop
from weft.workflows.turn_book import TurnBook

MAX_INCIDENTS = 20


class Context(Protocol):
    """Where time, ids and logs come from: the workflow's, or a unit test's."""

    def now(self) -> datetime: ...

    def new_hex(self) -> str: ...

    def warning(self, message: str) -> None: ...

    def correlation(self) -> dict[str, str]:
        """The run's ids for its events: `run_id`, and `trace_id` / `span_id` when traced."""
        ...


class WorkflowContext:
    """Workflow time, replay-safe random ids and the replay-aware workflow logger."""

    def __init__(self) -> None:
        self._correlation: dict[str, str] | None = None

    def now(self) -> datetime:
        return workflow.now()

    def new_hex(self) -> str:
        return workflow.uuid4().hex

    def warning(self, message: str) -> None:
        workflow.logger.warning(message)

    def correlation(self) -> dict[str, str]:
        if self._correlation is None:  # headers and run id are fixed for the run
            self._correlation = run_correlation()
        return self._correlation


@dataclass
class ThreadMemory:
    """Everything the thread remembers between steps (small, content-free)."""

    thread_id: str
    start: ThreadStartInput
    context: Context = field(default_factory=WorkflowContext)
    # Taken by thread.init (or carried); None only while the thread is `preparing`.
    snapshot: DefinitionSnapshot | None = None
    status: ThreadStatus = "preparing"
    active_turn: str | None = None
    active_side: Side | None = None
    # Set by a handoff; None is the thread's own agent.
    active_agent: str | None = None
    # Why the latest turn or session stopped: set only through its methods.
    stop: ThreadStop = field(default_factory=ThreadStop)
    last_outcome: str | None = None
    terminated_at: str | None = None
    terminate_reason: str | None = None
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
    actions: ActionBook = field(default_factory=ActionBook)
    incidents: list[dict[str, Any]] = field(default_factory=list)
    cost_unknown: bool = False
    subagents: SubagentBook = field(default_factory=SubagentBook)
    # The model context: boundary in force and token counts (contract/context_state.py).
    window: ContextState = field(default_factory=ContextState)
    # Recent turn results for callers that wait for a turn (workflows/turn_book.py).
    turns: TurnBook = field(default_factory=TurnBook)
    # Scheduled effects: pending ones (carried) and those whose timers fired.
    effects: EffectBook = field(default_factory=EffectBook)
    # Tool calls awaiting results and the transcript edits held for them (not carried).
    open_calls: OpenCalls = field(default_factory=OpenCalls)
    # The tree's budget against its spend as last reported (workflows/budget.py); None
    # when no limit applies. Limits live in `start.options.budget`, which is carried.
    budget: BudgetState | None = None
    # The MCP servers' tool catalogues, as last listed (contract/mcp_book.py).
    mcp: McpBook = field(default_factory=McpBook)
    # This run's history length and size, as last read where replays agree (not carried).
    history: HistoryGauge = field(default_factory=HistoryGauge)
    # Whether this run writes facts only once they are true (`TRUTHFUL_LOG_PATCH` in
    # agent_thread.py, asked once per run; runs recorded before it keep their old order).
    truthful_log: bool = False
    # Whether this run names its children `<agent>-<12 hex>` (`CHILD_ID_PATCH` in
    # subagents/spawner.py, asked once per run; runs recorded before it made `thread_<hex>`).
    readable_child_ids: bool = False
    # Why the thread could not start (its snapshot was refused: an unknown agent, say);
    # callers waiting on a turn are told this instead of waiting for ever.
    start_failure: str | None = None
    # An `upgrade_definitions` still to do (carried).
    definitions_upgrade: bool = False
    # `snapshot`'s digest, worked out once per snapshot (`definitions_digest`).
    _digested: tuple[DefinitionSnapshot, str] | None = field(default=None, repr=False)

    def use_definitions(self, snapshot: DefinitionSnapshot) -> None:
        """Run with `snapshot` from now on (the thread's first, or a newer version)."""
        self.snapshot = snapshot

    @property
    def definitions_digest(self) -> str | None:
        """The digest of the definitions in force (contract/definitions_version.py)."""
        if self.snapshot is None:
            return None
        if self._digested is None or self._digested[0] is not self.snapshot:
            self._digested = (self.snapshot, snapshot_digest(self.snapshot))
        return self._digested[1]

    @property
    def session_id(self) -> str:
        """The caller's session, or one derived from the thread (stable across runs)."""
        return self.start.session_id or default_session_id(self.thread_id)

    @property
    def subagent_id(self) -> str | None:
        """A child thread is the subagent its parent registered under this thread's id."""
        return self.thread_id if self.start.parent is not None else None

    @property
    def stop_reason(self) -> StopReason | None:
        """Why the latest turn or session stopped (read-only: `stop` owns it)."""
        return self.stop.reason

    @property
    def parent_id(self) -> str | None:
        return self.start.parent.thread_id if self.start.parent else None

    def is_terminated(self) -> bool:
        return self.terminated_at is not None

    def is_idle(self) -> bool:
        """Waiting for input with no turn in progress."""
        return self.status == "waiting_input" and self.active_turn is None

    # ---- facts and ids ---------------------------------------------------------------

    def incident(self, code: str, message: str, **ids: Any) -> dict[str, Any]:
        """Remember a warning or failure for `thread_read` (the most recent only); returns
        the entry, for the event that states it (contract/rebuild.py reads it there)."""
        entry = {"code": code, "message": message[:500], "at": self.timestamp()}
        entry.update({k: v for k, v in ids.items() if v is not None})
        self.incidents.append(entry)
        del self.incidents[:-MAX_INCIDENTS]
        return entry

    def warn(self, code: str, signal: str, message: str) -> None:
        """Record a refused input: a counter, an incident and a `runtime.warning` event."""
        self.warnings += 1
        entry = self.incident(code, message, signal=signal)
        self.context.warning(f"{code} ({signal}): {message}")
        payload = {"code": code, "signal": signal, "message": message, "incident": entry}
        self.emit("runtime.warning", payload)

    def now(self) -> datetime:
        """Workflow time: deterministic on replay."""
        return self.context.now()

    def timestamp(self) -> str:
        """ISO-8601 UTC workflow time, as events carry it."""
        return self.now().isoformat().replace("+00:00", "Z")

    def new_id(self, prefix: str) -> str:
        """A replay-safe unique id."""
        return f"{prefix}_{self.context.new_hex()}"

    def new_thread_id(self, agent: str) -> str:
        """A replay-safe id for a new thread of `agent`, shaped as every generated one is."""
        return thread_id(agent, self.context.new_hex())

    # ---- the outbox: what the workflow produced, written by the next activity ----------

    def emit(self, event_type: str, payload: Any = None, **ids: Any) -> Event:
        """Queue a workflow-produced event; it rides on the next activity to the store."""
        event = Event(
            type=event_type,
            event_id=self.new_id("evt"),
            timestamp=self.timestamp(),
            thread_id=self.thread_id,
            session_id=self.session_id,
            payload=payload,
            **{"subagent_id": self.subagent_id, **self.context.correlation(), **ids},
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

    def return_messages(self, messages: list[Message]) -> None:
        """Keep messages whose activity failed, ahead of any produced meanwhile."""
        self.outbox_messages[:0] = messages

    # ---- messages --------------------------------------------------------------------

    def new_message(
        self,
        *,
        role: Role,
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
        """Remember a message's ids and role (never its content), and its estimated size.

        A prompt tool's own messages (depth > 0) never join the main transcript, so they
        do not count toward its context window.
        """
        if message.depth == 0:
            self.window.note_message(message, self.start.options.context)
            self.turns.note_reply(message)
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
                parent_id=message.parent_id,
                depth=message.depth,
            )
        )
        if message.depth == 0:  # last: work it releases sees this message indexed
            self.open_calls.note(message)

    def forget_message(self, message_id: str) -> None:
        """Drop a message from the index: one a hook refused to store (it was never
        written), or one a tool deleted (ThreadState.delete_message)."""
        self.index = [m for m in self.index if m.id != message_id]

    # ---- counters and usage ----------------------------------------------------------

    def count_step(self, side: Side) -> None:
        self.counters.steps += 1
        self.counters.session_steps += 1
        if side == "a":
            self.counters.side_a_steps += 1
        else:
            self.counters.side_b_steps += 1

    def count_turn(self, side: Side) -> None:
        if side == "a":
            self.counters.side_a_turns += 1
        else:
            self.counters.side_b_turns += 1
        self.counters.turns += 1

    def total_usage(self) -> UsageTotals:
        """This thread's usage plus what its children reported (theirs include their own)."""
        total = self.usage.model_copy()
        for entry in self.subagents.children.values():
            child = UsageTotals.model_validate(entry.usage) if entry.usage else UsageTotals()
            total.input_tokens += child.input_tokens
            total.output_tokens += child.output_tokens
            total.cached_tokens += child.cached_tokens
            if child.cost_usd is not None:
                total.cost_usd = (total.cost_usd or 0.0) + child.cost_usd
        return total

    def thread_row(self) -> dict[str, Any]:
        """The store's row for this thread (its read-model summary)."""
        return {
            "thread_id": self.thread_id,
            "agent": self.start.agent,
            "status": self.status,
            "session_id": self.session_id,
            "user_id": self.start.user_id,
            "parent_thread_id": self.parent_id,
            "stop_reason": self.stop_reason,
            "last_outcome": self.last_outcome,
            "usage": self.total_usage().model_dump(by_alias=True),
        }
