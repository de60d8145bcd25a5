"""Subagents on the child's side (Runtime §8.2, §8.3, §10): reporting to the parent.

A child reaches its parent only through the `subagent_report` signal. Attachments are
copied into the parent's filesystem first, so the paths in a report are the parent's.
"""

from __future__ import annotations

from typing import Literal, Protocol

from temporalio import workflow

from weft.contract.subagents import SIGNAL_SUBAGENT_REPORT, SubagentReport
from weft.contract.thread import UsageTotals
from weft.workflows.background import BackgroundTasks
from weft.workflows.stop_rules import Stop
from weft.workflows.subagents.files import MissingFile, copy_files
from weft.workflows.views import Facts, Identity, Stopped

# Session ends a parent is told about as failures it can act on.
_FAILED = ("session_fail", "step_error", "max_total_steps", "repeated_tool_error")

ReportKind = Literal["status", "notify", "completed", "failed", "closed"]


class ReporterHost(Protocol):
    """What the parent reporter needs from the workflow."""

    def terminate(self, reason: str | None) -> None:
        """Soft shutdown (Runtime §10)."""


class ReporterView(Facts, Identity, Stopped, Protocol):
    """What reporting to the parent reads of the thread."""

    def total_usage(self) -> UsageTotals: ...


class ParentReporter:
    """What a thread started as a subagent tells its parent; inert for a root thread."""

    def __init__(self, mem: ReporterView, background: BackgroundTasks, host: ReporterHost) -> None:
        self._mem = mem
        self._background = background
        self._host = host

    def is_child(self) -> bool:
        return self._mem.start.parent is not None

    async def report_session_end(self, stop: Stop | None) -> None:
        """Deliver the session's terminal payload; a non-resumable child then ends (§10)."""
        mem, parent = self._mem, self._mem.start.parent
        if parent is None or mem.is_terminated():
            return
        failed = mem.stop_reason in _FAILED
        content = (stop.response if stop else None) or mem.last_outcome
        await self.report(
            "failed" if failed else "completed",
            content=content,
            attachments=list(stop.attachments) if stop else [],
            stop_reason=mem.stop_reason,
        )
        if not parent.resumable:
            self._host.terminate("delivered its result to the parent thread")

    def relay(self, kind: str, text: str | None) -> bool:
        """Send a set_status/notify_parent intent to the parent (§8.2); False for a root."""
        if not self.is_child():
            return False
        if kind == "notify_parent":
            self._background.run(self.report("notify", content=text))
        else:
            self._background.run(self.report("status", status=text))
        return True

    async def report(
        self,
        kind: ReportKind,
        *,
        content: str | None = None,
        status: str | None = None,
        attachments: list[str] | None = None,
        stop_reason: str | None = None,
    ) -> None:
        mem, parent = self._mem, self._mem.start.parent
        if parent is None:
            return
        report_id = mem.new_id("report")
        paths: list[str] = []
        if attachments:
            try:
                paths = await copy_files(mem.thread_id, parent.thread_id, attachments, report_id)
            except MissingFile as err:
                content = f"{content or ''}\n[attachments not delivered: {err}]".strip()
        report = SubagentReport(
            reference=mem.thread_id,
            kind=kind,
            report_id=report_id,
            status=status,
            content=content[:200_000] if content else content,
            attachments=paths,
            stop_reason=stop_reason,
            usage=mem.total_usage().model_dump(mode="json", by_alias=True),
        )
        try:
            await workflow.get_external_workflow_handle(parent.thread_id).signal(
                SIGNAL_SUBAGENT_REPORT, report.model_dump(mode="json", by_alias=True)
            )
        except Exception as err:  # a parent that is gone cannot be told
            mem.incident("parent_unreachable", f"{kind} report not delivered: {err}")
