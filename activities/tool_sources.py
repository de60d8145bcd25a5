"""The worker's tool sources, which its Env (activities/env.py) tries in order: an eval's
replayed results, MCP tools over the session pool, and function tools (the worker's own,
weft's `read_output` and the lifecycle tools)."""

from __future__ import annotations

import json
from typing import Any

from weft.activities.env import Dispatched, ToolDispatch
from weft.activities.mcp.calls import McpCalls
from weft.activities.mcp.pool import McpSessionPool
from weft.activities.previews import page_chars
from weft.activities.read_output import read_output
from weft.activities.spans import Spans
from weft.activities.tool_execute import error_result, execute_tool
from weft.activities.tool_replay import ToolReplays
from weft.contract.activities import ToolCallInput, ToolResult
from weft.contract.context import READ_OUTPUT_TOOL, ContextOptions
from weft.contract.context_tokens import ContextLimits, preview_cap_tokens
from weft.contract.definitions import DefinitionSnapshot, PromptDef
from weft.definitions import Definitions
from weft.store.protocols import HasMessages


def calling_prompt(call: ToolCallInput, snapshot: DefinitionSnapshot) -> PromptDef:
    """The prompt whose model called the tool: a prompt tool's own, or the side's."""
    if call.scope is not None:
        return snapshot.prompts[call.scope.prompt]
    return snapshot.prompts[snapshot.agent_def(call.agent).side(call.side).prompt]


class ReplayedTools:
    """An eval's recorded results (activities/tool_replay.py): the tool body never runs;
    hooks, events and storage stay as for a run. Lifecycle tools are not replayed: they
    only mark the step."""

    def __init__(self, replays: ToolReplays) -> None:
        self._replays = replays

    async def dispatch(self, request: ToolDispatch) -> Dispatched | None:
        function = request.call.tool_call.function
        spec = request.snapshot.tools.get(function.name)
        if spec is not None and spec.builtin:
            return None
        result = self._replays.serve(
            request.call.thread_id,
            function.name,
            function.arguments,
            request.call.result_message_id,
        )
        return None if result is None else Dispatched(result)


class McpTools:
    """Calls the workflow routed to an MCP server, through the worker's session pool."""

    def __init__(self, pool: McpSessionPool | None, *, spans: Spans) -> None:
        self._calls = McpCalls(pool, spans=spans) if pool is not None else None

    async def dispatch(self, request: ToolDispatch) -> Dispatched | None:
        target = request.call.mcp
        if target is None:
            return None
        if self._calls is None:
            return Dispatched(
                error_result(
                    "tool_unavailable",
                    f"tool {request.name!r} is an MCP tool, and this worker runs no MCP sessions",
                )
            )
        result, relisted = await self._calls.run(
            request.call, target, request.snapshot, request.state
        )
        return Dispatched(result, relisted)


class FunctionTools:
    """The thread's function tools, weft's `read_output` (unless the definitions shadow it)
    and the lifecycle tools; a name the snapshot does not know is not claimed."""

    def __init__(self, store: HasMessages, definitions: Definitions, *, spans: Spans) -> None:
        self._store = store
        self._definitions = definitions
        self._spans = spans

    async def dispatch(self, request: ToolDispatch) -> Dispatched | None:
        name = request.name
        spec = request.snapshot.tools.get(name)
        if spec is None and name != READ_OUTPUT_TOOL:
            return None
        try:
            raw_args = json.loads(request.call.tool_call.function.arguments or "{}")
        except ValueError as err:
            return Dispatched(
                error_result(
                    "invalid_arguments", f"arguments of {name!r} are not valid JSON: {err}"
                )
            )
        if not isinstance(raw_args, dict):
            return Dispatched(
                error_result("invalid_arguments", f"arguments of {name!r} must be a JSON object")
            )
        if spec is None:
            return Dispatched(await self._read_output(request, raw_args))
        if spec.builtin:
            # Lifecycle tools (stopTool, sessionStop, …) only mark the step; the workflow's
            # stop rules read their arguments.
            return Dispatched(ToolResult(status="success", result={"acknowledged": name}))
        tool = self._definitions.tools.get(name)
        if tool is None:
            return Dispatched(
                error_result(
                    "tool_unavailable",
                    f"tool {name!r} is in this thread's definitions but not on this worker",
                )
            )
        return Dispatched(await execute_tool(tool, raw_args, request.state, spans=self._spans))

    async def _read_output(self, request: ToolDispatch, raw_args: dict[str, Any]) -> ToolResult:
        """weft's built-in pager, with pages sized for the calling prompt's model."""
        prompt = calling_prompt(request.call, request.snapshot)
        limits = ContextLimits.for_model(request.snapshot.models[prompt.model])
        cap = preview_cap_tokens(limits.prompt_budget, ContextOptions().preview_share)
        return await read_output(self._store, request.call.thread_id, raw_args, page_chars(cap))
