"""The floor: the scenario as a Temporal engineer would write it by hand.

One activity per model call (weft's OpenAI adapter over httpx, to the scripted server) and
one per tool call; the workflow holds the whole transcript and passes it as the model
activity's input. No store, no events, no context assembly: what is left is what Temporal
itself costs, which is what weft's per-step overhead is measured against.

`plain_loop` plays the same loop in process, calling the two activity methods directly:
no Temporal at all. Its time is the model's and the tool's own, which grows with the
transcript sent; a side's overhead per step is its time less the loop's.
(bench/handwritten.py is a different yardstick: it also writes SQLite; bench_steps.py uses it.)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

with workflow.unsafe.imports_passed_through():
    # Used only by the activities, outside the sandbox.
    import httpx

    from weft.activities.providers import ChatRequest, OpenAIChatProvider
    from weft.definitions import FunctionTool

WORKFLOW = "BenchFloor"
MODEL_ACTIVITY = "floor.model"
TOOL_ACTIVITY = "floor.tool"


class FloorActivities:
    """The model call and the tool call, nothing around them."""

    def __init__(self, http: httpx.AsyncClient, base_url: str, tool: FunctionTool) -> None:
        self._provider = OpenAIChatProvider(http, base_url=base_url, api_key=None)
        self._tool = tool

    @activity.defn(name=MODEL_ACTIVITY)
    async def model(self, args: dict[str, Any]) -> dict[str, Any]:
        """One completion over the transcript the workflow passes in."""
        reply = await self._provider.complete(
            ChatRequest(
                model=args["model"],
                messages=args["messages"],
                tools=args["tools"],
                parallel_tool_calls=False,
            )
        )
        return {
            "content": reply.content,
            "tool_calls": [c.model_dump() for c in reply.tool_calls],
        }

    @activity.defn(name=TOOL_ACTIVITY)
    async def tool(self, call: dict[str, Any]) -> str:
        """Run the tool on the call's arguments; the result as the JSON text the model sees."""
        args = self._tool.args.model_validate_json(call["function"]["arguments"])
        return json.dumps(await self._tool.execute(None, args))


Model = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Tool = Callable[[dict[str, Any]], Awaitable[str]]


async def model_tool_loop(args: dict[str, Any], model: Model, tool: Tool) -> int:
    """Model, then each tool call, until the model answers; returns the model calls made.

    The workflow and the plain loop both run this, so they do the same work."""
    transcript = list(args["messages"])
    steps = 0
    while True:
        steps += 1
        reply = await model({**args, "messages": transcript})
        calls = reply["tool_calls"]
        transcript.append(
            {
                "role": "assistant",
                "content": reply["content"],
                **({"tool_calls": calls} if calls else {}),
            }
        )
        if not calls:
            return steps
        for call in calls:
            result = await tool(call)
            transcript.append({"role": "tool", "tool_call_id": call["id"], "content": result})


@workflow.defn(name=WORKFLOW)
class FloorWorkflow:
    """The loop with each model call and tool call an activity."""

    @workflow.run
    async def run(self, args: dict[str, Any]) -> int:
        timeout = timedelta(seconds=60)

        async def model(request: dict[str, Any]) -> dict[str, Any]:
            reply: dict[str, Any] = await workflow.execute_activity(
                MODEL_ACTIVITY, request, start_to_close_timeout=timeout
            )
            return reply

        async def tool(call: dict[str, Any]) -> str:
            result: str = await workflow.execute_activity(
                TOOL_ACTIVITY, call, start_to_close_timeout=timeout
            )
            return result

        return await model_tool_loop(args, model, tool)


async def plain_loop(activities: FloorActivities, args: dict[str, Any]) -> int:
    """The loop in process, the activity methods called directly: no Temporal."""
    return await model_tool_loop(args, activities.model, activities.tool)


def stock_sandbox() -> SandboxedWorkflowRunner:
    """The SDK's sandbox as a hand-written workflow would run in it.

    A hand-written workflow runs in the sandbox unless its author turns it off, so the floor
    does. Passing pydantic through keeps per-run module imports out of the comparison.
    weft's own workflows run outside the sandbox (weft/workers/workflow_runner.py says why);
    that saving is weft's, so the floor does not get it.
    """
    restrictions = SandboxRestrictions.default.with_passthrough_modules(
        "weft.contract", "pydantic", "pydantic_core"
    )
    return SandboxedWorkflowRunner(restrictions=restrictions)


@asynccontextmanager
async def floor_activities(base_url: str, tool: FunctionTool) -> AsyncIterator[FloorActivities]:
    """The floor's activities over a pooled httpx client of their own."""
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(connect=10.0, read=120.0, write=30.0, pool=30.0),
        limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
    ) as http:
        yield FloorActivities(http, base_url, tool)


@asynccontextmanager
async def floor_worker(
    client: Client, task_queue: str, base_url: str, tool: FunctionTool
) -> AsyncIterator[Worker]:
    """A worker polling `task_queue` for the floor workflow, in the SDK's stock sandbox."""
    async with (
        floor_activities(base_url, tool) as activities,
        Worker(
            client,
            task_queue=task_queue,
            workflows=[FloorWorkflow],
            activities=[activities.model, activities.tool],
            workflow_runner=stock_sandbox(),
        ) as worker,
    ):
        yield worker
