"""What the MCP session pool gives the activities: listed tools, call replies, errors.

The pool (`pool.py`) speaks the protocol through the official `mcp` SDK; the activities
(`tool.catalog`, `tool.call`) turn these into catalogues and tool results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from weft.contract.activities import ToolResult
from weft.contract.mcp import ElicitationAnswer


@dataclass(frozen=True)
class ListedTool:
    """One tool as the server's `tools/list` described it (not yet filtered or checked)."""

    name: str
    description: str
    input_schema: Any
    annotations: dict[str, Any] | None = None


@dataclass(frozen=True)
class McpReply:
    """A tool call's result, and the server's tool list as listed again when the server
    reported `list_changed` on that session since its last listing (else None)."""

    result: ToolResult
    relisted: list[ListedTool] | None = None


class McpUnavailable(Exception):
    """A server that cannot be reached: it will not start, times out, or breaks the
    protocol. The message names the server and says what went wrong."""

    def __init__(self, server: str, reason: str) -> None:
        super().__init__(f"MCP server {server!r}: {reason}")
        self.server = server
        self.reason = reason


class ElicitationHandler(Protocol):
    """Asks a person for what a server's `elicitation/create` requests, and waits."""

    async def __call__(
        self, message: str, requested_schema: dict[str, Any]
    ) -> ElicitationAnswer: ...
