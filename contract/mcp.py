"""MCP servers as tool sources: their definitions, the tool catalogue and elicitation.

An MCP server is defined in `mcp/<name>.yaml` (`McpServerDef`) and frozen into a thread's
snapshot. Its tools are not: the `tool.catalog` activity lists them when a prompt that
uses the server becomes active, records `tool.catalog.resolved`, and the workflow keeps
the result (`McpServerCatalog`, one per server) in its memory, so a replay never lists
again. A prompt names a server's tools in its `tools` as `{mcp: server}` (every tool the
server's filter lets through) or as `server.tool` (that one tool).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import Field, model_validator

from weft.contract.wire import CamelModel

# A server's name is the head of `server.tool`, so it holds no dot.
MCP_SERVER_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_\-]*$"
# What providers accept as a tool name (OpenAI's rule, the strictest of the two).
MODEL_TOOL_NAME_PATTERN = r"^[A-Za-z0-9_\-]{1,64}$"

ACTIVITY_TOOL_CATALOG = "tool.catalog"
# Refresh the catalogue of every server the thread uses, or of the ones named.
SIGNAL_REFRESH_TOOLS = "refresh_tools"
# Sent by a `tool.call` activity whose MCP server asks a person for input mid-call.
SIGNAL_MCP_ELICITATION = "mcp_elicitation"
# Polled by that activity until the person's answer (or its timeout) is known.
QUERY_MCP_ELICITATION = "mcp_elicitation_answer"

CatalogReason = Literal["prompt_active", "refresh", "list_changed"]


class McpServerDef(CamelModel):
    """One MCP server: how to reach it (stdio or streamable HTTP) and which tools to offer.

    `${NAME}` in `args`, `env`, `cwd`, `url` and `headers` is replaced by the thread's env
    value `NAME` (secrets included) when a session is opened; a name the thread lacks is an
    error naming the server and the variable.
    """

    name: str = Field(pattern=MCP_SERVER_NAME_PATTERN)
    description: str | None = None
    command: str | None = Field(
        default=None,
        min_length=1,
        description="stdio: the program to run (`python` is the worker's own interpreter)",
    )
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(
        default_factory=dict, description="stdio: the server process's environment"
    )
    cwd: str | None = Field(
        default=None, description="stdio: working directory (default: the definitions folder)"
    )
    url: str | None = Field(default=None, min_length=1, description="streamable HTTP endpoint")
    headers: dict[str, str] = Field(default_factory=dict)
    allow: list[str] | None = Field(default=None, description="offer only these tools")
    deny: list[str] | None = Field(default=None, description="offer every tool but these")
    prefix: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9_\-]*$",
        description="put before each tool's name, as the model sees it",
    )
    startup_timeout_seconds: float = Field(default=15.0, gt=0)
    call_timeout_seconds: float | None = Field(
        default=None, gt=0, description="one tool call (default: the thread's tool timeout)"
    )
    elicitation_timeout_seconds: float | None = Field(
        default=None, gt=0, description="how long a person has to answer an elicitation"
    )
    max_sessions: int = Field(
        default=4,
        ge=1,
        le=32,
        description="sessions a worker opens at once for one resolved env (a call holds its "
        "session alone); 1 keeps a server that remembers its client on one session",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerDef:
        if (self.command is None) == (self.url is None):
            raise ValueError("give exactly one of `command` (stdio) or `url` (streamable HTTP)")
        if self.url is None and self.headers:
            raise ValueError("`headers` apply to a `url` server only")
        if self.command is None and (self.args or self.env or self.cwd):
            raise ValueError("`args`, `env` and `cwd` apply to a `command` server only")
        if self.allow is not None and self.deny is not None:
            raise ValueError("give `allow` or `deny`, not both")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"

    def offers(self, tool: str) -> bool:
        """Whether the allow/deny filter lets the server's tool `tool` through."""
        if self.allow is not None:
            return tool in self.allow
        return self.deny is None or tool not in self.deny

    def model_name(self, tool: str) -> str:
        """The name the model calls the server's tool `tool` by."""
        return f"{self.prefix}{tool}"


class McpRef(CamelModel):
    """A prompt's `{mcp: server}` entry: every tool of the server, or the `tools` listed."""

    mcp: str = Field(pattern=MCP_SERVER_NAME_PATTERN)
    tools: list[str] | None = Field(default=None, description="only these of its tools")


class McpToolSpec(CamelModel):
    """One MCP tool as the model sees it, and where it runs."""

    name: str = Field(description="the name the model calls it by (the server's prefix + tool)")
    server: str
    tool: str = Field(description="its name on the server")
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    annotations: dict[str, Any] | None = None

    def offered(self) -> dict[str, Any]:
        """The `{name, description, parameters}` a model request lists."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


class McpServerCatalog(CamelModel):
    """What one listing of one server found: its tools, or why there are none.

    `catalog_id` is the content address the store keeps it under (model.call loads it by
    id); `digest` covers the tool list alone, so a changed list is noticed.
    """

    catalog_id: str
    server: str
    status: Literal["ready", "failed"]
    error: str | None = None
    tools: list[McpToolSpec] = Field(default_factory=list)
    digest: str = ""
    warnings: list[str] = Field(
        default_factory=list,
        description="the tools skipped (a bad name or schema, a clash), each naming the server",
    )
    resolved_at: str


class ToolCatalogInput(CamelModel):
    """List the tools of `servers` for the thread (its env opens their sessions)."""

    thread_id: str
    session_id: str | None = None
    snapshot_id: str
    agent: str | None = None
    side: Literal["a", "b"] = "a"
    prompt: str | None = Field(
        default=None, description="the prompt that uses them (its env applies; default the side's)"
    )
    servers: list[str]
    reason: CatalogReason
    turn_id: str | None = None
    step_id: str | None = None
    event_id: str = Field(description="the id of the `tool.catalog.resolved` event it writes")


class ToolCatalogResult(CamelModel):
    """Each listed server's catalogue, already stored (by `catalog_id`) with its event."""

    servers: dict[str, McpServerCatalog]


class McpToolTarget(CamelModel):
    """What `tool.call` needs to run an MCP tool: the server, the tool's name there, and
    the digest of the catalogue the workflow offered it from."""

    server: str
    tool: str
    digest: str = ""


class McpCallOutcome(CamelModel):
    """Beside an MCP call's result: the server's tool list digest as the session now knows
    it, when the server reported `list_changed` (None otherwise)."""

    server: str
    digest: str | None = None


class McpElicitation(CamelModel):
    """An MCP server's `elicitation/create` during a tool call, as the activity signals it."""

    action_id: str = Field(min_length=1, max_length=256)
    tool_call_id: str
    tool_name: str
    turn_id: str
    step_id: str
    server: str
    message: str
    requested_schema: dict[str, Any] = Field(default_factory=dict)
    timeout_seconds: float | None = Field(default=None, gt=0)


class ElicitationAnswer(CamelModel):
    """What the elicitation query returns once a person (or a timeout) has decided."""

    action_id: str
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


class RefreshTools(CamelModel):
    """The `refresh_tools` payload: which servers to list again (all the thread uses when
    omitted)."""

    servers: list[str] | None = None


def single_tool_ref(entry: str, servers: Iterable[str]) -> tuple[str, str] | None:
    """`(server, tool)` when the tools entry `entry` is `server.tool` for a known server."""
    head, dot, tail = entry.partition(".")
    if dot and tail and head in set(servers):
        return head, tail
    return None


def servers_of(tools: Iterable[str | object], servers: Iterable[str]) -> list[str]:
    """The MCP servers a prompt's `tools` entries use, in order, once each."""
    known = set(servers)
    used: list[str] = []
    for entry in tools:
        if isinstance(entry, McpRef):
            used.append(entry.mcp)
        elif isinstance(entry, str):
            ref = single_tool_ref(entry, known)
            if ref is not None:
                used.append(ref[0])
    return list(dict.fromkeys(used))


def offered_mcp_tools(
    tools: Iterable[str | object], catalogs: Mapping[str, McpServerCatalog]
) -> list[McpToolSpec]:
    """The catalogued MCP tools a prompt's `tools` entries offer, in order, once each."""
    offered: dict[str, McpToolSpec] = {}
    for entry in tools:
        if isinstance(entry, McpRef):
            catalog = catalogs.get(entry.mcp)
            for spec in catalog.tools if catalog else []:
                if entry.tools is None or spec.tool in entry.tools:
                    offered.setdefault(spec.name, spec)
        elif isinstance(entry, str):
            ref = single_tool_ref(entry, catalogs)
            if ref is None:
                continue
            catalog = catalogs[ref[0]]
            for spec in catalog.tools:
                if spec.tool == ref[1]:
                    offered.setdefault(spec.name, spec)
    return list(offered.values())


def failed_servers(
    tools: Iterable[str | object], catalogs: Mapping[str, McpServerCatalog]
) -> list[McpServerCatalog]:
    """The servers a prompt uses whose last listing failed (the model is told of each)."""
    used = servers_of(tools, catalogs)
    return [catalogs[s] for s in used if catalogs[s].status == "failed"]


def valid_model_tool_name(name: str) -> bool:
    """Whether providers accept `name` as a tool name."""
    return re.fullmatch(MODEL_TOOL_NAME_PATTERN, name) is not None


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


def elicitation_problems(schema: Mapping[str, Any], content: Any) -> list[str]:
    """What is wrong with a person's `content` for an elicitation's `requested_schema`.

    MCP restricts that schema to a flat object of primitive properties (string, number,
    integer, boolean, enums), so checking required names, types and enums is the whole
    check; an unknown property is refused too, since the server did not ask for it.
    """
    if not isinstance(content, dict):
        return ["the answer must be an object of the requested fields"]
    properties = schema.get("properties") or {}
    problems = [
        f"{name!r} is required" for name in schema.get("required") or [] if name not in content
    ]
    for name, value in content.items():
        field = properties.get(name)
        if not isinstance(field, Mapping):
            problems.append(f"{name!r} was not asked for (fields: {', '.join(properties)})")
            continue
        expected = _JSON_TYPES.get(str(field.get("type")))
        wrong_bool = isinstance(value, bool) and field.get("type") in ("number", "integer")
        if expected is not None and (not isinstance(value, expected) or wrong_bool):
            problems.append(f"{name!r} must be of type {field['type']}")
        elif "enum" in field and value not in field["enum"]:
            problems.append(f"{name!r} must be one of {field['enum']}")
    return problems
