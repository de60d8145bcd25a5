"""The `code.run` activity: runCode (Runtime §13) for workflows, on an injected SandboxPool."""

from __future__ import annotations

import asyncio

from temporalio import activity

from weft.activities.sandbox import SandboxPool, run_code, to_jsonable
from weft.activities.spans import Spans, failed
from weft.contract.code import ACTIVITY_CODE_RUN, CodeExecutionResult, CodeRunInput

HEARTBEAT_INTERVAL_S = 1.0


class CodeRunActivities:
    """Class-based so the worker builds the pool once and every attempt reuses it."""

    def __init__(
        self,
        pool: SandboxPool,
        *,
        heartbeat_interval_s: float = HEARTBEAT_INTERVAL_S,
        spans: Spans | None = None,
    ):
        self._pool = pool
        self._heartbeat_interval_s = heartbeat_interval_s
        self._spans = spans or Spans()

    @activity.defn(name=ACTIVITY_CODE_RUN)
    async def run(self, input: CodeRunInput) -> CodeExecutionResult:
        """Run the code in a `code.run` span, heartbeating while it runs; cancellation
        terminates the sandbox."""
        with self._spans.span("code.run", {"weft.code.chars": len(input.source)}) as span:
            result = await self._run(input)
            span.set_attribute("weft.code.status", result.status)
            if result.status != "success":
                failed(span, result.status)
            return result

    async def _run(self, input: CodeRunInput) -> CodeExecutionResult:
        handle = run_code(input.source, input.options, pool=self._pool)
        try:
            while handle.running:
                activity.heartbeat({"reports": len(handle.reports)})
                try:
                    await asyncio.wait_for(
                        asyncio.shield(handle.result()), self._heartbeat_interval_s
                    )
                except TimeoutError:
                    continue
        except asyncio.CancelledError:
            # Temporal cancellation (or worker shutdown) becomes terminate(), then we settle.
            handle.terminate("the code.run activity was cancelled")
            raise
        result = await handle
        # Only JSON crosses the Temporal boundary: bytes, dates, sets... are rendered as JSON.
        return result.model_copy(
            update={"result": to_jsonable(result.result), "reports": to_jsonable(result.reports)}
        )
