"""One MCP tool call inside `tool.call`: find the server, call the tool through the pool.

Everything around the call (events, hooks, spilling, previews, heartbeats) is `tool.call`'s,
shared with function tools. A server that cannot be reached and a tool that fails are
both error results: MCP tool errors are tool results, never crashes.
"""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.util.types import AttributeValue

from weft.activities.mcp.catalog import catalog_tools, reserved_names, tools_digest
from weft.activities.mcp.elicitation import ElicitationBridge
from weft.activities.mcp.pool import McpSessionPool
from weft.activities.mcp.types import McpReply, McpUnavailable
from weft.activities.spans import REDACTED, Spans, without_secrets
from weft.activities.tool_execute import end_tool_span, error_result, state_env
from weft.activities.tool_state import ThreadState
from weft.contract.activities import ToolCallInput, ToolResult
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.mcp import McpCallOutcome, McpServerDef, McpToolTarget
from weft.contract.thread_env import EnvEntry


class McpCalls:
    """Runs MCP tools for `tool.call` through the worker's session pool."""

    def __init__(self, pool: McpSessionPool, *, spans: Spans | None = None) -> None:
        self._pool = pool
        self._spans = spans or Spans()

    async def run(
        self,
        call: ToolCallInput,
        target: McpToolTarget,
        snapshot: DefinitionSnapshot,
        state: ThreadState,
    ) -> tuple[ToolResult, McpCallOutcome | None]:
        """The tool's result, and the server's new tool list digest when it changed."""
        name = call.tool_call.function.name
        server = snapshot.mcp_servers.get(target.server)
        if server is None:
            return error_result(
                "unknown_tool",
                f"tool {name!r} belongs to MCP server {target.server!r}, which this thread's "
                f"definitions do not define",
            ), None
        try:
            args = json.loads(call.tool_call.function.arguments or "{}")
        except ValueError as err:
            return error_result(
                "invalid_arguments", f"arguments of {name!r} are not valid JSON: {err}"
            ), None
        if not isinstance(args, dict):
            return error_result(
                "invalid_arguments", f"arguments of {name!r} must be a JSON object"
            ), None
        reply = await self._traced(call, server, target.tool, args, state)
        if reply.relisted is None:
            return reply.result, None
        tools, _ = catalog_tools(server, reply.relisted, reserved_names(snapshot))
        return reply.result, McpCallOutcome(server=server.name, digest=tools_digest(tools))

    async def _traced(
        self,
        call: ToolCallInput,
        server: McpServerDef,
        tool: str,
        args: dict[str, Any],
        state: ThreadState,
    ) -> McpReply:
        """The call in an `execute_tool {name}` span, as function tools have (GenAI
        conventions; status ok or error; content only when enabled, secrets redacted)."""
        name = call.tool_call.function.name
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call.tool_call.id,
            "weft.mcp.server": server.name,
            "weft.mcp.tool": tool,
        }
        env = state_env(state)
        with self._spans.span(f"execute_tool {name}", attributes) as span:
            secrets = self._spans.secrets(state.thread_id, env)
            self._spans.record_content(span, "gen_ai.tool.call.arguments", args, secrets)
            reply = await self._call(call, server, tool, args, env, state)
            end_tool_span(self._spans, span, reply.result, secrets)
            return reply

    async def _call(
        self,
        call: ToolCallInput,
        server: McpServerDef,
        tool: str,
        args: dict[str, Any],
        env: dict[str, EnvEntry],
        state: ThreadState,
    ) -> McpReply:
        bridge = ElicitationBridge(call, server)
        try:
            return await self._pool.call_tool(
                server, env, tool, args, timeout=server.call_timeout_seconds, elicit=bridge
            )
        except McpUnavailable as err:
            # A server's error may quote its command line or URL, env values substituted.
            message = await _masked(str(err), env, state)
            return McpReply(error_result("mcp_server_unavailable", message))
        except Exception as err:  # as a function tool's exception: a result, not a crash
            return McpReply(
                ToolResult(
                    status="error",
                    error=await _masked(f"{type(err).__name__}: {err}", env, state),
                    error_code="tool_exception",
                )
            )
        finally:
            bridge.close()


async def _masked(text: str, env: dict[str, EnvEntry], state: ThreadState) -> str:
    """`text` without the thread's secret values; when any were masked (here, or by the
    session that made the text: pool.py masks the same way), `output.redacted` says how
    many (never which)."""
    masked = without_secrets(text, env)
    found = masked.count(REDACTED)
    if found:
        await state.record_redacted("error", found)
    return masked
