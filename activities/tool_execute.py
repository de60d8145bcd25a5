"""Running one function tool: validate its arguments, call it, make its result a ToolResult.

Shared by the `tool.call` activity and `ThreadState.invoke_tool`. A tool's own failure
(bad arguments, an exception, a value that is not JSON) is an error result, never an
exception: Runtime §5.2 says tool errors are persisted and must not crash the loop.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import Any, Protocol

from opentelemetry.trace import Span, StatusCode
from opentelemetry.util.types import AttributeValue
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from weft.activities.spans import Spans, failed
from weft.activities.thread_env_state import ThreadEnv
from weft.contract.activities import ToolResult
from weft.contract.thread_env import EnvEntry
from weft.contract.validation import describe_validation_error
from weft.definitions import FunctionTool


class ToolState(Protocol):
    """What running a tool reads of the ThreadState it hands the tool (tool_state.py)."""

    @property
    def thread_id(self) -> str: ...

    @property
    def tool_call_id(self) -> str | None: ...

    # Private: the whole env, secrets included, is for the span's redaction, not for tools.
    @property
    def _env(self) -> ThreadEnv: ...


def state_env(state: ToolState) -> dict[str, EnvEntry]:
    """The env a tool's state resolved (its secrets are redacted from span content)."""
    return state._env.entries


async def execute_tool(
    tool: FunctionTool, raw_args: dict[str, Any], state: ToolState, *, spans: Spans | None = None
) -> ToolResult:
    """Run `tool` with `raw_args` (validated against its args model) and `state`, in an
    `execute_tool {name}` span when tracing (GenAI conventions; status ok or error)."""
    spans = spans or Spans()
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool.name,
    }
    if state.tool_call_id:
        attributes["gen_ai.tool.call.id"] = state.tool_call_id
    with spans.span(f"execute_tool {tool.name}", attributes) as span:
        secrets = spans.secrets(state.thread_id, state_env(state))
        spans.record_content(span, "gen_ai.tool.call.arguments", raw_args, secrets)
        result = await _execute(tool, raw_args, state)
        end_tool_span(spans, span, result, secrets)
        return result


def end_tool_span(spans: Spans, span: Span, result: ToolResult, secrets: set[str]) -> None:
    """A tool span's status and (when content is on) its result, from the tool's result."""
    span.set_attribute("weft.tool.status", result.status)
    if result.status == "error":
        failed(span, result.error_code or "tool_error")
    else:
        span.set_status(StatusCode.OK)
    shown = result.result if result.status != "error" else result.error
    spans.record_content(span, "gen_ai.tool.call.result", shown, secrets)


async def _execute(tool: FunctionTool, raw_args: dict[str, Any], state: ToolState) -> ToolResult:
    try:
        args: BaseModel = tool.args.model_validate(raw_args)
    except ValidationError as err:
        return error_result(
            "invalid_arguments",
            f"invalid arguments for {tool.name!r}: {describe_validation_error(err)}",
        )
    try:
        if tool.is_async:
            value = await tool.execute(state, args)
        else:
            value = await asyncio.to_thread(tool.execute, state, args)
    except asyncio.CancelledError:
        raise
    except Exception as err:
        return ToolResult(
            status="error",
            error=f"{type(err).__name__}: {err}",
            error_code="tool_exception",
            stack=traceback.format_exc(limit=8),
        )
    if isinstance(value, ToolResult):
        return value
    try:
        return ToolResult(status="success", result=to_jsonable_python(value))
    except Exception as err:
        return error_result(
            "unserializable_result", f"{tool.name!r} returned a value that is not JSON: {err}"
        )


def error_result(code: str, message: str) -> ToolResult:
    """An error result with `code` and a message saying what went wrong."""
    return ToolResult(status="error", error=message, error_code=code)
