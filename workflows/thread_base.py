"""State and helpers shared by the AgentThread workflow and its control plane."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel
from temporalio import workflow
from temporalio.exceptions import ApplicationError

from contract.actions import (
    ActionKind,
)
from contract.activities import (
    Intent,
)
from contract.definitions import AgentDef, DefinitionSnapshot, PromptDef
from contract.messages import (
    QueuedMessage,
    QueuedTool,
    Side,
)
from contract.subagents import RegistryEntry, SpawnRequest, SubagentReport
from contract.thread import (
    SIGNAL_TERMINATE,
    StopReason,
    ThreadStartInput,
    ThreadStatus,
    UsageTotals,
)
from workflows import read_models, search_attributes
from workflows.control import parse_single
from workflows.payload_budget import encoded_size, megabytes
from workflows.thread_state import QueueEntry, ThreadMemory


class ThreadBase:
    """The thread's state, and what its step cycle and its handlers both need."""

    def __init__(self) -> None:
        self._mem: ThreadMemory | None = None
        self._start: ThreadStartInput | None = None
        self._snapshot: DefinitionSnapshot | None = None
        self._status: ThreadStatus = "preparing"
        self._active_turn: str | None = None
        self._active_side: Side | None = None
        self._stop_reason: StopReason | None = None
        self._last_outcome: str | None = None
        self._terminated_at: str | None = None
        self._terminate_reason: str | None = None
        self._in_flight: asyncio.Task[Any] | None = None
        self._model_in_flight = False
        self._interrupted = False
        # Queued messages the last drain refused as too large to schedule.
        self._oversized: list[str] = []
        # Subagents (workflows/subagents.py): the registry, by child thread id.
        self._children: dict[str, RegistryEntry] = {}
        # Blocking calls waiting for a child's terminal payload, by child thread id.
        self._awaiting: dict[str, SubagentReport | None] = {}
        # Subagents waiting on scoped variables (Runtime §7.5), by variable request id.
        self._deferred: dict[str, SpawnRequest] = {}
        # Set by a handoff; None is the thread's own agent.
        self._active_agent: str | None = None
        # Prompts whose immediate subagents have been started (Runtime §7.3).
        self._immediate_done: set[str] = set()
        # Child watchers (dropped at continue-as-new: reports arrive by signal anyway) and
        # work that must finish before the run ends (reports to a parent, deferred boots).
        self._watchers: list[asyncio.Task[Any]] = []
        self._background: list[asyncio.Task[Any]] = []

    def terminate(self, reason: str | None) -> None:
        """Soft shutdown (Runtime §10): stamp, abort in-flight work, refuse new work."""
        if self._refuse_when_terminated(SIGNAL_TERMINATE):
            return
        mem = self._require_mem()
        self._terminated_at = mem.timestamp()
        self._terminate_reason = reason
        mem.emit(
            "thread.updated",
            {"status": "cancelled", "terminatedAt": self._terminated_at, "reason": reason},
        )
        if self._in_flight is not None and not self._in_flight.done():
            self._in_flight.cancel()

    # ToolHost: what the tool runner may ask of the thread.
    def is_terminated(self) -> bool:
        return self._terminated_at is not None

    def track(self, task: Any) -> None:
        self._in_flight = task

    def set_waiting(self, kind: ActionKind | None) -> None:
        """Show that the thread waits on a human (status and search attribute), or not."""
        if kind is None:
            self._set_status("running")
        else:
            self._set_status("waiting_input" if kind == "ask_human" else "waiting_permission")
        search_attributes.upsert_awaiting(kind)

    def _agent(self) -> AgentDef:
        """The agent that runs the thread now (its own, or a handoff target)."""
        return self._require_snapshot().agent_def(self._active_agent)

    def _active_prompt(self, side: Side) -> PromptDef:
        return self._require_snapshot().prompts[self._agent().side(side).prompt]

    def total_usage(self) -> UsageTotals:
        """This thread's usage plus what its children reported (theirs include their own)."""
        mem = self._require_mem()
        total = mem.usage.model_copy()
        for entry in self._children.values():
            child = UsageTotals.model_validate(entry.usage) if entry.usage else UsageTotals()
            total.input_tokens += child.input_tokens
            total.output_tokens += child.output_tokens
            total.cached_tokens += child.cached_tokens
            if child.cost_usd is not None:
                total.cost_usd = (total.cost_usd or 0.0) + child.cost_usd
        return total

    def _in_background(self, task: asyncio.Task[Any], *, watcher: bool = False) -> None:
        """Keep a reference to a workflow task (asyncio holds tasks weakly), dropping done ones."""
        tasks = self._watchers if watcher else self._background
        tasks[:] = [t for t in tasks if not t.done()]
        tasks.append(task)

    def _background_busy(self) -> bool:
        """Whether a report or deferred boot is still in flight (not a safe point)."""
        return any(not t.done() for t in self._background)

    def _is_idle(self) -> bool:
        return self._status == "waiting_input" and self._active_turn is None

    def _permission_state(self) -> dict[str, Any]:
        if self._snapshot is None:
            return {}
        side = self._active_side or "a"
        prompt = self._snapshot.prompts[self._snapshot.agent.side(side).prompt]
        return read_models.permission_state(
            self._require_mem(), self._snapshot.agent.permissions, prompt.permissions
        )

    def apply_intents(self, intents: list[Intent]) -> None:
        """Apply ThreadState changes a tool asked for, after its result is persisted."""
        mem = self._require_mem()
        for intent in intents:
            parsed: QueuedMessage | QueuedTool | str
            if intent.kind == "queue_message":
                parsed = parse_single("queueMessage", [intent.data], QueuedMessage)
            elif intent.kind == "queue_tool":
                parsed = parse_single("queueTool", [intent.data], QueuedTool)
            elif intent.kind == "terminate":
                self.terminate(str(intent.data.get("reason") or "terminated by a tool"))
                continue
            else:
                text = intent.data.get("status") or intent.data.get("content")
                if not self._relay_to_parent(intent.kind, None if text is None else str(text)):
                    mem.emit("thread.updated", {"statusNote": text})
                continue
            if isinstance(parsed, str):
                self._warn("malformed_intent", intent.kind, parsed)
            elif self._too_large(f"{intent.kind} intent", parsed):
                continue
            elif isinstance(parsed, QueuedMessage):
                self._queue_message(parsed)
            else:
                self._enqueue(
                    QueueEntry(mem.new_id("q"), mem.new_id("turn"), mem.timestamp(), tool=parsed)
                )

    def _relay_to_parent(self, kind: str, text: str | None) -> bool:
        """Send a set_status/notify_parent intent to the parent; False for a root thread."""
        return False

    def _queue_message(self, message: QueuedMessage) -> QueueEntry:
        mem = self._require_mem()
        entry = QueueEntry(mem.new_id("q"), mem.new_id("turn"), mem.timestamp(), message=message)
        self._enqueue(entry)
        return entry

    def _enqueue(self, entry: QueueEntry) -> None:
        mem = self._require_mem()
        mem.queue.append(entry)
        mem.emit(
            "queue.changed",
            {"action": "enqueued", "queueId": entry.queue_id, "queue": mem.queue_snapshot()},
            queue_id=entry.queue_id,
        )

    def _too_large(self, name: str, payload: BaseModel) -> bool:
        """Refuse (with a warning naming `name`) a payload the thread could not schedule."""
        problem = self._size_problem(name, payload)
        if problem is not None:
            self._warn("payload_too_large", name, problem)
        return problem is not None

    def _size_problem(self, name: str, payload: BaseModel) -> str | None:
        budget = self._require_start().options.payload_budget_bytes
        size = encoded_size(payload)
        if size <= budget:
            return None
        return (
            f"{name} payload is {megabytes(size)} encoded, over the thread's payload budget "
            f"of {megabytes(budget)} (Temporal refuses payloads over 2 MB); upload large "
            "content as an attachment"
        )

    def _refuse_when_terminated(self, name: str) -> bool:
        if not self._terminated_at:
            return False
        self._warn(
            "after_terminate",
            name,
            f"thread was terminated at {self._terminated_at}; {name} ignored",
        )
        return True

    def _warn(self, code: str, signal: str, message: str) -> None:
        mem = self._require_mem()
        mem.warnings += 1
        mem.incident(code, message, signal=signal)
        workflow.logger.warning("%s (%s): %s", code, signal, message)
        mem.emit("runtime.warning", {"code": code, "signal": signal, "message": message})

    def _set_status(self, status: ThreadStatus) -> None:
        if status != self._status:
            self._status = status
            search_attributes.upsert_status(status)

    def thread_row(self) -> dict[str, Any]:
        """The store's row for this thread (its read-model summary)."""
        start, mem = self._require_start(), self._require_mem()
        return {
            "thread_id": mem.thread_id,
            "agent": start.agent,
            "status": self._status,
            "session_id": start.session_id,
            "user_id": start.user_id,
            "parent_thread_id": self._parent_id(),
            "stop_reason": self._stop_reason,
            "last_outcome": self._last_outcome,
            "usage": self.total_usage().model_dump(by_alias=True),
        }

    def _parent_id(self) -> str | None:
        start = self._start
        return start.parent.thread_id if start and start.parent else None

    def _require_mem(self) -> ThreadMemory:
        if self._mem is None:
            raise ApplicationError("thread is not started yet", type="NotStarted")
        return self._mem

    def _require_snapshot(self) -> DefinitionSnapshot:
        if self._snapshot is None:
            raise ApplicationError("thread definitions are not loaded yet", type="NotStarted")
        return self._snapshot

    def _require_start(self) -> ThreadStartInput:
        if self._start is None:
            raise ApplicationError("thread is not started yet", type="NotStarted")
        return self._start
