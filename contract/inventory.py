"""The `tool_inventory_snapshot` and `execution_environment_snapshot` read models.

Types and names shared by the workflow (which builds them, `workflows/inventory.py`), the
client (which reads them live or from the store) and the surfaces. What the thread cannot
know is listed in `unknown` with the reason, never guessed (seed 001).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import Field

from weft.contract.actions import DecidedBy, PermissionMode, RuleDecision
from weft.contract.thread_env import EnvType
from weft.contract.wire import CamelModel

QUERY_TOOL_INVENTORY = "get_tool_inventory"
QUERY_EXECUTION_ENVIRONMENT = "get_execution_environment"
# `snapshot.updated` kinds the thread writes when it closes, read back once it is closed.
KIND_TOOL_INVENTORY = "tool_inventory"
KIND_EXECUTION_ENVIRONMENT = "execution_environment"

ToolKind = Literal["function", "prompt", "agent", "mcp", "builtin"]
ReadSource = Literal["live", "store"]
EnvLayer = Literal["prompt", "agent", "thread"]


class ToolSource(CamelModel):
    """Where a tool comes from: a definitions file, a prompt, an agent, an MCP server, or
    the runtime itself."""

    type: Literal["definition", "prompt", "agent", "mcp", "runtime"]
    prompt: str | None = None
    agent: str | None = None
    server: str | None = None
    tool: str | None = Field(default=None, description="an MCP tool's name on its server")


class ToolPermission(CamelModel):
    """What the permission policy decides for a call of the tool.

    `decision` holds for a call whose arguments match no argument pattern; the rules in
    `argumentRules` decide instead for the arguments they match.
    """

    decision: RuleDecision
    decided_by: DecidedBy | Literal["no_policy", "runtime"]
    mode: PermissionMode | None = None
    rule: dict[str, Any] | None = None
    argument_rules: list[dict[str, Any]] = Field(default_factory=list)


class InventoryTool(CamelModel):
    """One tool the current agent, side and prompt can call (or could, were it enabled)."""

    name: str = Field(description="the name the model calls it by")
    kind: ToolKind
    runtime_kind: str = Field(description="who runs it (ToolSpec.kind, or `mcp`)")
    description: str = ""
    source: ToolSource
    enabled: bool = True
    optional: str | None = Field(default=None, description="the env flag that enables it")
    disabled_reason: str | None = None
    permission: ToolPermission


class McpServerState(CamelModel):
    """One MCP server the prompt uses, as the thread last listed it."""

    server: str
    status: Literal["ready", "failed", "not_listed"]
    error: str | None = None
    tools: int = 0
    catalog_id: str | None = None
    resolved_at: str | None = None
    refresh_due: str | None = Field(default=None, description="why it is listed again next")


class ToolInventory(CamelModel):
    """The `tool_inventory_snapshot`: tools for the caller, policy, context and mode."""

    inventory_ref: str = Field(description="its content address (a `toolInventoryRef`)")
    thread_id: str
    agent: str
    side: Literal["a", "b"]
    prompt: str
    mode: PermissionMode | Literal["no_policy"]
    thread_status: str
    tools: list[InventoryTool] = Field(default_factory=list)
    mcp_servers: list[McpServerState] = Field(default_factory=list)
    unknown: list[str] = Field(default_factory=list)
    updated_at: str
    source: ReadSource = "live"


class EnvVariable(CamelModel):
    """One env name the prompt's tools see: its type and the layer that set it. Never its
    value."""

    name: str
    type: EnvType
    layer: EnvLayer
    declared: bool = False
    required: bool = False


class ExecutionEnvironment(CamelModel):
    """The `execution_environment_snapshot`: env names, filesystem, limits, processes.

    It fits the session snapshot schema's `executionEnvironment` object.
    """

    thread_id: str
    agent: str
    side: Literal["a", "b"]
    prompt: str
    thread_status: str
    env: list[EnvVariable] = Field(default_factory=list)
    missing_variables: list[str] = Field(
        default_factory=list, description="declared `required` variables no layer sets"
    )
    cwd: str | None = Field(default=None, description="None: tools run in a worker's process")
    workspace_roots: list[dict[str, Any]] = Field(default_factory=list)
    limits: dict[str, Any] = Field(default_factory=dict)
    processes: dict[str, Any] = Field(default_factory=dict)
    unknown: list[str] = Field(default_factory=list)
    updated_at: str
    source: ReadSource = "live"


def content_ref(prefix: str, value: Any) -> str:
    """A short content address of a JSON value: equal values, equal refs."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return f"{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:16]}"
