"""The parent's subagent registry (Runtime §7.1, §8.2, §8.3, §10): reports and closure.

The registry lives in `ThreadMemory.subagents` (carried across continue-as-new); every
change is a `subagent.*` event carrying the whole entry, which the store projects into
its table. Children reach the parent only through the `subagent_report` signal.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Protocol

from temporalio import workflow

from weft.contract.activities import ToolResult
from weft.contract.carry_parts import SubagentBook
from weft.contract.messages import QueuedMessage
from weft.contract.subagents import (
    ERROR_SUBAGENT_FAILED,
    RegistryEntry,
    SubagentReport,
    SubagentStatus,
)
from weft.contract.thread import SIGNAL_TERMINATE
from weft.workflows.outbox import Outbox
from weft.workflows.queue import ThreadQueue
from weft.workflows.subagents.common import LIVE, tool_error
from weft.workflows.views import Facts

# How long a terminated parent waits for its children to confirm they closed.
CHILD_CLOSE_TIMEOUT = timedelta(seconds=60)


class UnknownChild(Exception):
    """A report or message named a subagent that is not a child of this thread."""


class RegistryView(Facts, Protocol):
    """What the registry reads of the thread, and the subagent book it changes."""

    @property
    def thread_id(self) -> str: ...

    @property
    def subagents(self) -> SubagentBook: ...


class SubagentRegistry:
    """The registry of a parent thread and what its children report to it."""

    def __init__(self, mem: RegistryView, queue: ThreadQueue, outbox: Outbox) -> None:
        self._mem = mem
        self._outbox = outbox
        self._queue = queue
        # The registry itself lives in memory (carried across continue-as-new).
        self._children = mem.subagents.children
        # Blocking calls waiting for a child's terminal payload, by child thread id.
        self._awaiting: dict[str, SubagentReport | None] = {}

    def add(self, entry: RegistryEntry) -> None:
        self._children[entry.reference] = entry

    def drop(self, reference: str) -> None:
        del self._children[reference]

    # ---- reports from children (Runtime §8.2, §8.3) ----------------------------------

    def receive(self, report: SubagentReport) -> None:
        """Apply a child's report; `UnknownChild` when the sender is not a child."""
        if report.reference not in self._children:
            raise UnknownChild(
                f"report from {report.reference!r}, which is not a child of this thread"
            )
        self.apply(report)

    def apply(self, report: SubagentReport) -> None:
        entry = self._children[report.reference]
        if report.usage:
            entry.usage = report.usage
        if report.kind == "status":
            entry.status_note = report.status
            self.emit(entry, "subagent.status", note=report.status)
            return
        if report.kind == "notify":
            self.emit(entry, "subagent.status", notified=True)
            self._tell_parent(entry, report, "says")
            return
        # Before the event, which states the entry as it now is (contract/rebuild.py).
        entry.updated_at = self._mem.timestamp()
        if report.kind in ("completed", "failed"):
            entry.last_result = report.content
            entry.stop_reason = report.stop_reason
            done: SubagentStatus = "completed" if report.kind == "completed" else "failed"
            self.set_status(entry, "idle" if entry.resumable else done, quiet=True)
            event = "subagent.completed" if report.kind == "completed" else "subagent.failed"
            self.emit(entry, event, stopReason=report.stop_reason)
        else:  # closed
            entry.closed = True
            if entry.status in LIVE:
                entry.status = "failed" if report.status == "failed" else "terminated"
            if report.content and not entry.last_result:
                entry.last_result = report.content
            self.emit(entry, "subagent.closed")
        if report.reference in self._awaiting and self._awaiting[report.reference] is None:
            # A blocking call waits for this: the payload becomes its tool result.
            self._awaiting[report.reference] = report
            return
        if report.kind != "closed" and entry.parent_communication == "implicit":
            self._tell_parent(entry, report, report.kind)

    def _tell_parent(self, entry: RegistryEntry, report: SubagentReport, verb: str) -> None:
        """Queue a child's payload to this (parent) thread as a message (§8.2)."""
        if self._mem.is_terminated():
            return
        summary = report.content or "(no message)"
        text = f"Subagent {entry.name!r} (reference {entry.reference}) {verb}: {summary}"
        self._queue.add_message(
            QueuedMessage(
                role="user",
                content=text[:200_000],
                attachments=list(report.attachments),
                metadata={
                    "subagent": {
                        "reference": entry.reference,
                        "name": entry.name,
                        "kind": report.kind,
                        "stopReason": report.stop_reason,
                    }
                },
            )
        )

    async def result_when_done(self, entry: RegistryEntry) -> ToolResult:
        """Wait for the child's next terminal payload and turn it into a tool result."""
        return self.result_of(entry, await self._await_report(entry.reference))

    async def _await_report(self, reference: str) -> SubagentReport | None:
        """Wait for the child's next terminal payload; None when this thread is terminated."""
        self._awaiting[reference] = None
        await workflow.wait_condition(
            lambda: self._awaiting.get(reference) is not None or self._mem.is_terminated()
        )
        return self._awaiting.pop(reference, None)

    def result_of(self, entry: RegistryEntry, report: SubagentReport | None) -> ToolResult:
        if report is None:
            return tool_error("aborted", "not finished: the thread was terminated")
        data = {
            "reference": entry.reference,
            "name": entry.name,
            "status": entry.status,
            "stopReason": report.stop_reason,
            "attachments": report.attachments,
        }
        if report.kind == "completed":
            return ToolResult(
                status="success",
                result={**data, "response": report.content},
                attachments=list(report.attachments) or None,
            )
        what = "failed" if report.kind == "failed" else "ended before answering"
        return ToolResult(
            status="error",
            error_code=ERROR_SUBAGENT_FAILED,
            error=f"subagent {entry.name!r} ({entry.reference}) {what}"
            f"{f' ({report.stop_reason})' if report.stop_reason else ''}: "
            f"{report.content or 'no details'}",
            error_data=data,
        )

    # ---- termination (Runtime §10) ---------------------------------------------------

    async def propagate_terminate(self) -> None:
        """Soft-terminate every live child and wait (bounded) for each to report `closed`,
        so the parent's final registry shows how its children ended (§10)."""
        live = [e for e in self._children.values() if not e.closed]
        reason = f"parent thread {self._mem.thread_id} was terminated"
        for entry in live:
            try:
                await workflow.get_external_workflow_handle(entry.reference).signal(
                    SIGNAL_TERMINATE, {"reason": reason}
                )
            except Exception as err:  # a child already gone needs nothing
                workflow.logger.info("terminate of child %s: %s", entry.reference, err)
        if not live:
            return
        try:
            await workflow.wait_condition(
                lambda: all(e.closed for e in live), timeout=CHILD_CLOSE_TIMEOUT
            )
        except TimeoutError:
            open_ = ", ".join(e.reference for e in live if not e.closed)
            self._mem.incident(
                "children_not_closed", f"no closed report within the timeout from: {open_}"
            )

    # ---- lookups and events ----------------------------------------------------------

    def find(self, wanted: Any) -> RegistryEntry:
        """A child by reference, or by name (the live one first); `UnknownChild` if none."""
        entry = self._lookup(wanted)
        if entry is None:
            known = ", ".join(f"{e.name!r} ({e.reference})" for e in self._children.values())
            raise UnknownChild(f"no subagent {wanted!r}; known: {known or '(none)'}")
        return entry

    def _lookup(self, wanted: Any) -> RegistryEntry | None:
        if not isinstance(wanted, str):
            return None
        if wanted in self._children:
            return self._children[wanted]
        named = [e for e in self._children.values() if e.name == wanted]
        live = [e for e in named if not e.closed]
        candidates = live or named
        return candidates[-1] if candidates else None

    def live_of(self, agent: str) -> list[RegistryEntry]:
        """The live instances of `agent`, oldest first."""
        return [e for e in self._children.values() if e.agent == agent and not e.closed]

    async def publish(self) -> None:
        """Write the outbox now, so a spawn or message to a child is in the store (and seen
        by clients and by the child's ThreadState) before the parent waits on it."""
        await self._outbox.flush()

    def set_status(
        self, entry: RegistryEntry, status: SubagentStatus, *, quiet: bool = False
    ) -> None:
        entry.status = status
        entry.updated_at = self._mem.timestamp()
        if not quiet:
            self.emit(entry, "subagent.status")

    def emit(
        self, entry: RegistryEntry, event: str, turn_id: str | None = None, **extra: Any
    ) -> None:
        self._mem.emit(
            event,
            {
                "parentThreadId": self._mem.thread_id,
                "childThreadId": entry.reference,
                "entry": entry.model_dump(mode="json", by_alias=True),
                **extra,
            },
            turn_id=turn_id,
            tool_call_id=entry.tool_call_id,
            subagent_id=entry.reference,  # the child's own events carry the same id
        )
