"""The parent's subagent registry (Runtime §7.1, §8.2, §8.3, §10): reports and closure.

The registry lives in workflow state (carried across continue-as-new); every change is a
`subagent.*` event carrying the whole entry, which the store projects into its table.
Children reach the parent only through the `subagent_report` signal.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from contract.activities import ToolResult
from contract.messages import QueuedMessage, Side
from contract.subagents import (
    ERROR_SUBAGENT_FAILED,
    SIGNAL_SUBAGENT_REPORT,
    RegistryEntry,
    SubagentReport,
)
from contract.thread import SIGNAL_TERMINATE
from contract.thread_env import EnvEntry, merge_env
from workflows.control import parse_single
from workflows.outbox import flush
from workflows.thread_base import ThreadBase

LIVE = ("starting", "running", "idle")
# How long a terminated parent waits for its children to confirm they closed.
CHILD_CLOSE_TIMEOUT = timedelta(seconds=60)


class SubagentRegistry(ThreadBase):
    """The registry and what children report to it."""

    # ---- reports from children (Runtime §8.2, §8.3) ----------------------------------

    def _on_subagent_report(self, values: list[Any]) -> None:
        parsed = parse_single(SIGNAL_SUBAGENT_REPORT, values, SubagentReport)
        if isinstance(parsed, str):
            self._warn("malformed_signal", SIGNAL_SUBAGENT_REPORT, parsed)
        elif parsed.reference not in self._children:
            self._warn(
                "unknown_subagent",
                SIGNAL_SUBAGENT_REPORT,
                f"report from {parsed.reference!r}, which is not a child of this thread",
            )
        else:
            self._apply_report(parsed)

    def _apply_report(self, report: SubagentReport) -> None:
        entry = self._children[report.reference]
        if report.usage:
            entry.usage = report.usage
        if report.kind == "status":
            entry.status_note = report.status
            self._emit_child("subagent.status", entry, note=report.status)
            return
        if report.kind == "notify":
            self._emit_child("subagent.status", entry, notified=True)
            self._tell_parent(entry, report, "says")
            return
        if report.kind in ("completed", "failed"):
            entry.last_result = report.content
            entry.stop_reason = report.stop_reason
            self._set_child_status(entry, "idle" if entry.resumable else report.kind, quiet=True)
            event = "subagent.completed" if report.kind == "completed" else "subagent.failed"
            self._emit_child(event, entry, stopReason=report.stop_reason)
        else:  # closed
            entry.closed = True
            if entry.status in LIVE:
                entry.status = "failed" if report.status == "failed" else "terminated"
            if report.content and not entry.last_result:
                entry.last_result = report.content
            self._emit_child("subagent.closed", entry)
        entry.updated_at = self._require_mem().timestamp()
        if report.reference in self._awaiting and self._awaiting[report.reference] is None:
            # A blocking call waits for this: the payload becomes its tool result.
            self._awaiting[report.reference] = report
            return
        if report.kind != "closed" and entry.parent_communication == "implicit":
            self._tell_parent(entry, report, report.kind)

    def _tell_parent(self, entry: RegistryEntry, report: SubagentReport, verb: str) -> None:
        """Queue a child's payload to this (parent) thread as a message (§8.2)."""
        if self._terminated_at:
            return
        summary = report.content or "(no message)"
        text = f"Subagent {entry.name!r} (reference {entry.reference}) {verb}: {summary}"
        self._queue_message(
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

    async def _await_report(self, reference: str) -> SubagentReport | None:
        """Wait for the child's next terminal payload; None when this thread is terminated."""
        self._awaiting[reference] = None
        await workflow.wait_condition(
            lambda: self._awaiting.get(reference) is not None or bool(self._terminated_at)
        )
        return self._awaiting.pop(reference, None)

    def _result_of(self, entry: RegistryEntry, report: SubagentReport | None) -> ToolResult:
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
        reason = f"parent thread {self._require_mem().thread_id} was terminated"
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
            self._require_mem().incident(
                "children_not_closed", f"no closed report within the timeout from: {open_}"
            )

    # ---- helpers ---------------------------------------------------------------------

    def _find_child(self, wanted: Any) -> RegistryEntry | None:
        if not isinstance(wanted, str):
            return None
        if wanted in self._children:
            return self._children[wanted]
        named = [e for e in self._children.values() if e.name == wanted]
        live = [e for e in named if not e.closed]
        candidates = live or named
        return candidates[-1] if candidates else None

    async def _publish(self) -> None:
        """Write the outbox now, so a spawn or message to a child is in the store (and seen
        by clients and by the child's ThreadState) before the parent waits on it."""
        await flush(self._require_mem())

    def _set_child_status(self, entry: RegistryEntry, status: Any, *, quiet: bool = False) -> None:
        entry.status = status
        entry.updated_at = self._require_mem().timestamp()
        if not quiet:
            self._emit_child("subagent.status", entry)

    def _emit_child(
        self, event: str, entry: RegistryEntry, turn_id: str | None = None, **extra: Any
    ) -> None:
        self._require_mem().emit(
            event,
            {
                "parentThreadId": self._require_mem().thread_id,
                "childThreadId": entry.reference,
                "entry": entry.model_dump(mode="json", by_alias=True),
                **extra,
            },
            turn_id=turn_id,
            tool_call_id=entry.tool_call_id,
        )

    def _env(self, side: Side) -> dict[str, EnvEntry]:
        """This thread's env as the workflow knows it: prompt, agent, then thread values."""
        agent = self._agent()
        prompt = self._require_snapshot().prompts[agent.side(side).prompt]
        return merge_env(prompt.env, agent.env, self._require_start().env)


class MissingFile(Exception):
    """Attachments that could not be copied: a path missing in the source thread, or a
    copy that failed past its retries."""


def tool_error(code: str, message: str) -> ToolResult:
    return ToolResult(status="error", error=message, error_code=code)


def failure_text(err: BaseException) -> str:
    parts, current = [], err
    while current is not None:
        parts.append(str(current) or type(current).__name__)
        current = current.__cause__  # type: ignore[assignment]
    return ": ".join(p for p in parts if p)[:2000]
