"""Running one function tool: validate its arguments, call it, make its result a ToolResult.

Shared by the `tool.call` activity and `ThreadState.invoke_tool`. A tool's own failure
(bad arguments, an exception, a value that is not JSON) is an error result, never an
exception: Runtime §5.2 says tool errors are persisted and must not crash the loop.
"""

from __future__ import annotations

import asyncio
import traceback
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from weft.activities.definitions import FunctionTool
from weft.contract.activities import ToolResult
from weft.contract.validation import describe_validation_error

if TYPE_CHECKING:
    from weft.activities.tool_state import ThreadState


async def execute_tool(
    tool: FunctionTool, raw_args: dict[str, Any], state: ThreadState
) -> ToolResult:
    """Run `tool` with `raw_args` (validated against its args model) and `state`."""
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
