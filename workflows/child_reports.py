"""Subagents on the child's side (Runtime §8.2, §8.3, §10): reporting to the parent.

A child reaches its parent only through the `subagent_report` signal. Attachments are
copied into the parent's filesystem first, so the paths in a report are the parent's.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from temporalio import workflow

from contract.subagents import SIGNAL_SUBAGENT_REPORT, SubagentReport
from workflows.stop_rules import Stop
from workflows.subagent_registry import MissingFile
from workflows.subagents import SubagentHost

# Session ends a parent is told about as failures it can act on.
_FAILED = ("session_fail", "step_error", "max_total_steps", "repeated_tool_error")

ReportKind = Literal["status", "notify", "completed", "failed", "closed"]


class ChildReports(SubagentHost):
    """What a thread started as a subagent tells its parent."""

    def _is_child(self) -> bool:
        return self._require_start().parent is not None

    async def report_session_end(self, stop: Stop | None) -> None:
        """Deliver the session's terminal payload; a non-resumable child then ends (§10)."""
        parent = self._require_start().parent
        if parent is None or self._terminated_at:
            return
        failed = self._stop_reason in _FAILED
        content = (stop.response if stop else None) or self._last_outcome
        await self._report(
            "failed" if failed else "completed",
            content=content,
            attachments=list(stop.attachments) if stop else [],
            stop_reason=self._stop_reason,
        )
        if not parent.resumable:
            self.terminate("delivered its result to the parent thread")

    def _relay_to_parent(self, kind: str, text: str | None) -> bool:
        # A child's set_status and notify_parent intents go to its parent (§8.2).
        if not self._is_child():
            return False
        if kind == "notify_parent":
            self.report_later("notify", content=text)
        else:
            self.report_later("status", status=text)
        return True

    def report_later(self, kind: ReportKind, **fields: Any) -> None:
        """Send a report from synchronous code (a tool's intent); awaited before the run ends."""
        self._in_background(asyncio.create_task(self._report(kind, **fields)))

    async def _report(
        self,
        kind: ReportKind,
        *,
        content: str | None = None,
        status: str | None = None,
        attachments: list[str] | None = None,
        stop_reason: str | None = None,
    ) -> None:
        parent = self._require_start().parent
        if parent is None:
            return
        mem = self._require_mem()
        report_id = mem.new_id("report")
        paths: list[str] = []
        if attachments:
            try:
                paths = await self._copy_files(parent.thread_id, attachments, report_id)
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
            usage=self.total_usage().model_dump(mode="json", by_alias=True),
        )
        try:
            await workflow.get_external_workflow_handle(parent.thread_id).signal(
                SIGNAL_SUBAGENT_REPORT, report.model_dump(mode="json", by_alias=True)
            )
        except Exception as err:  # a parent that is gone cannot be told
            mem.incident("parent_unreachable", f"{kind} report not delivered: {err}")

    async def finish_background(self) -> None:
        """Wait for reports and deferred boots still in flight."""
        while self._background:
            pending, self._background = self._background, []
            await asyncio.gather(*pending, return_exceptions=True)
