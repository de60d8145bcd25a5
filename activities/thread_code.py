"""ThreadState's `run_code`: JavaScript/TypeScript in the worker's sandbox (Runtime §13).

The run's `sandbox.applied` / `sandbox.violation` facts (activities/sandbox/_facts.py) are
written as events of the call; runs are numbered when they start, so a retried tool
numbers its runs alike and writes each fact once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from weft.activities.sandbox import CodeExecution, SandboxFact, SandboxPool, run_code
from weft.activities.thread_scope import ThreadScope


class ThreadCode:
    """Runs code for a tool, hook or effect; stops it when `abort` is set."""

    def __init__(
        self, scope: ThreadScope, *, sandbox: SandboxPool | None, abort: asyncio.Event
    ) -> None:
        self._scope = scope
        self.sandbox = sandbox
        self._abort = abort

    def run_code(self, source: str, options: dict[str, Any] | None = None) -> CodeExecution:
        """Run `source` in the sandbox; the awaitable handle of the run.

        The run is terminated when the thread's execution is aborted: the tool's activity
        is cancelled, for example by `terminate`.
        """
        scope = self._scope
        run = scope.number("code")

        async def record(facts: list[SandboxFact]) -> None:
            events = [scope.event(kind, f"code{run}:{end}", data) for end, kind, data in facts]
            await scope.append(events)

        return run_code(source, options, pool=self.sandbox, abort=self._abort, observe=record)
