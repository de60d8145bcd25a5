"""Small pieces the subagent parts share: live statuses and tool errors."""

from __future__ import annotations

from weft.contract.activities import ToolResult

# Registry statuses of a child that can still work or report.
LIVE = ("starting", "running", "idle")


class ToolRefused(Exception):
    """An agent tool call that ends with an error result instead of running."""

    def __init__(self, result: ToolResult) -> None:
        super().__init__(result.error)
        self.result = result


def tool_error(code: str, message: str) -> ToolResult:
    return ToolResult(status="error", error=message, error_code=code)


def refuse(code: str, message: str) -> ToolRefused:
    """A `ToolRefused` carrying a plain error result."""
    return ToolRefused(tool_error(code, message))
