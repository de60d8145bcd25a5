"""What the MCP SDK returns, as weft's types: listed tools and `ToolResult`s.

A server's tool-level failure is an error `ToolResult`, never an exception (Runtime §5.2);
binary parts become small placeholders, so no base64 reaches a transcript.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from mcp import types

from weft.activities.mcp.types import ListedTool
from weft.contract.activities import ToolResult

SESSION_LOST = "mcp_session_lost"
TOOL_ERROR = "mcp_tool_error"
RPC_ERROR = "mcp_error"
TIMEOUT = "timeout"


def listed_tool(tool: types.Tool) -> ListedTool:
    """A `tools/list` entry, raw: name, description, schema and annotations as given."""
    annotations = tool.annotations.model_dump(exclude_none=True) if tool.annotations else None
    return ListedTool(
        name=tool.name,
        description=tool.description or "",
        input_schema=tool.inputSchema,
        annotations=annotations,
    )


def tool_result(result: types.CallToolResult) -> ToolResult:
    """`result` as a `ToolResult`: `isError` is an error; else structured content, or the
    text of its parts (one text part is that string), binary parts as placeholders."""
    if result.isError:
        texts = [part.text for part in result.content if isinstance(part, types.TextContent)]
        message = "\n".join(texts) or "the tool reported an error and said nothing more"
        return ToolResult(status="error", error=message, error_code=TOOL_ERROR)
    if result.structuredContent is not None:
        return ToolResult(status="success", result=result.structuredContent)
    parts = [_part(part) for part in result.content]
    if all(isinstance(part, str) for part in parts):
        return ToolResult(status="success", result="\n".join(str(p) for p in parts))
    return ToolResult(status="success", result=parts)


def error_result(code: str, message: str) -> ToolResult:
    return ToolResult(status="error", error=message, error_code=code)


def _part(part: types.ContentBlock) -> str | dict[str, Any]:
    if isinstance(part, types.TextContent):
        return part.text
    if isinstance(part, types.ImageContent | types.AudioContent):
        return {"type": part.type, "mimeType": part.mimeType, "bytes": _decoded_size(part.data)}
    if isinstance(part, types.EmbeddedResource):
        contents = part.resource
        if isinstance(contents, types.TextResourceContents):
            return contents.text
        return {
            "type": "resource",
            "uri": str(contents.uri),
            "mimeType": contents.mimeType,
            "bytes": _decoded_size(contents.blob),
        }
    return {"type": "resource_link", "uri": str(part.uri), "name": part.name}


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4
