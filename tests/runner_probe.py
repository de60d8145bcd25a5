"""A workflow for tests/test_workflow_runner.py, in a module of its own: the SDK's sandbox
(the reference the test compares weft's runner with) re-imports a workflow's module, and a
test module's imports do not belong in it."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import activity, workflow


@activity.defn(name="runner_probe_echo")
async def echo(text: str) -> dict[str, Any]:
    return {"echo": text, "length": len(text)}


@workflow.defn(name="WorkflowRunnerProbe", sandboxed=True)
class ProbeWorkflow:
    """Three activities, each with a summary: payloads of every kind a step writes; the
    result says whether it ran in the sandbox."""

    @workflow.run
    async def run(self, text: str) -> dict[str, Any]:
        replies = []
        for i in range(3):
            replies.append(
                await workflow.execute_activity(
                    echo,
                    f"{text}-{i}",
                    start_to_close_timeout=timedelta(seconds=10),
                    summary=f"echo {i}",
                )
            )
        return {"replies": replies, "sandboxed": workflow.unsafe.in_sandbox()}
