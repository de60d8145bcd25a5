"""The Env seam: what a worker's activities reach tools through, one Protocol (the seeds'
"Env"). `tool.call` hands every call to `env.tools().dispatch`; the worker composes its
`ToolEnv` (workers/agent_worker.py) and a unit test may hand its own.

weft's Env covers tool dispatch only; docs/design-notes.md "Seams" says why events,
instructions and a working directory are not on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from weft.activities.tool_execute import error_result
from weft.contract.activities import ToolCallInput, ToolResult
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.mcp import McpCallOutcome

if TYPE_CHECKING:
    from weft.activities.tool_state import ThreadState


@dataclass(frozen=True, kw_only=True)
class ToolDispatch:
    """One tool call to run: the call, its thread's definitions and the tool's ThreadState."""

    call: ToolCallInput
    snapshot: DefinitionSnapshot
    state: ThreadState

    @property
    def name(self) -> str:
        """The called tool's name."""
        return self.call.tool_call.function.name


@dataclass(frozen=True)
class Dispatched:
    """A tool's result, and an MCP server's new tool list when the call changed it."""

    result: ToolResult
    mcp: McpCallOutcome | None = None


class ToolSource(Protocol):
    """One kind of tool (replayed, MCP, function): runs the calls it claims, None for others."""

    async def dispatch(self, request: ToolDispatch) -> Dispatched | None: ...


class ToolDispatcher(Protocol):
    """Runs any tool call: a call no source claims gets an error result, never an exception
    (Runtime §5.2: tool errors are persisted and must not crash the loop)."""

    async def dispatch(self, request: ToolDispatch) -> Dispatched: ...


class Env(Protocol):
    """What the activities reach outside the thread through."""

    def tools(self) -> ToolDispatcher: ...


class ToolSources:
    """A `ToolDispatcher` over sources tried in a fixed order: the first that claims a call
    runs it (an eval's replayed result comes before the live tool it replaces)."""

    def __init__(self, sources: Sequence[ToolSource]) -> None:
        self._sources = tuple(sources)

    async def dispatch(self, request: ToolDispatch) -> Dispatched:
        for source in self._sources:
            dispatched = await source.dispatch(request)
            if dispatched is not None:
                return dispatched
        return Dispatched(
            error_result(
                "unknown_tool",
                f"unknown tool {request.name!r}; available tools: "
                f"{', '.join(sorted(request.snapshot.tools)) or '(none)'}",
            )
        )


@dataclass(frozen=True)
class ToolEnv:
    """The worker's Env: its tool sources, composed by the worker."""

    dispatcher: ToolDispatcher

    def tools(self) -> ToolDispatcher:
        return self.dispatcher
