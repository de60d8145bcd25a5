"""Start-up checks of MCP servers (`mcp/<name>.yaml`) and of the prompt entries that use them.

A prompt names a server's tools as `{mcp: server}` (all its filter lets through, or the
`tools` listed) or as the string `server.tool`. Every such entry must name a defined server
and tools its allow/deny filter offers, under a name providers accept; and `server.tool`
must mean one thing only, so no function tool, prompt or agent may be named
`server.anything`. Each problem is a `DefinitionError` naming the file and the field.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

from pydantic import ValidationError

from weft.contract.definitions import ToolRef
from weft.contract.mcp import (
    MODEL_TOOL_NAME_PATTERN,
    McpRef,
    McpServerDef,
    single_tool_ref,
    valid_model_tool_name,
)
from weft.contract.validation import describe_validation_error
from weft.definitions.errors import DefinitionError, known_names
from weft.definitions.tables import DefinitionTables

# The kind an MCP server is filed under in `Definitions.sources` (`where(MCP_KIND, name)`).
MCP_KIND = "mcp server"


def mcp_server_error(
    where: str, err: ValidationError, data: Mapping[str, object]
) -> DefinitionError:
    """A server file's validation error, naming the field.

    A rule across fields (`command` or `url`, `allow` or `deny`) has no field of its own:
    it is said of the first field its message names that the file sets.
    """
    first = err.errors()[0]
    if first["loc"]:
        return DefinitionError(where, None, describe_validation_error(err))
    message = str(first["msg"]).removeprefix("Value error, ")
    named = re.findall(r"`(\w+)`", message)
    field = next((n for n in named if n in data), named[0] if named else None)
    return DefinitionError(where, field, message)


def check_mcp_servers(definitions: DefinitionTables) -> None:
    """Allow-lists name tools the model can be offered; nothing else is named `server.x`."""
    for server in definitions.mcp_servers.values():
        for i, tool in enumerate(server.allow or []):
            _refuse_bad_model_name(
                definitions.where(MCP_KIND, server.name), f"allow[{i}]", server, tool
            )
    tables: list[tuple[str, str, Collection[str]]] = [
        ("tool", "a function tool", definitions.tools),
        ("prompt", "a prompt", definitions.prompts),
        ("agent", "an agent", definitions.agents),
    ]
    for kind, what, table in tables:
        for name in table:
            ref = single_tool_ref(name, definitions.mcp_servers)
            if ref is not None:
                raise DefinitionError(
                    definitions.where(kind, name),
                    "name",
                    f"{name!r} is ambiguous: it is {what} and, as `server.tool`, the tool "
                    f"{ref[1]!r} of MCP server {ref[0]!r} "
                    f"({definitions.where(MCP_KIND, ref[0])}); rename one of them",
                )


def check_mcp_ref(definitions: DefinitionTables, where: str, index: int, entry: McpRef) -> None:
    """A prompt's `{mcp: server}` entry: a known server, and tools its filter offers."""
    field = f"tools[{index}]"
    server = definitions.mcp_servers.get(entry.mcp)
    if server is None:
        raise DefinitionError(
            where,
            f"{field}.mcp",
            f"unknown MCP server {entry.mcp!r}; known servers: "
            f"{known_names(definitions.mcp_servers)} (a server is mcp/<name>.yaml)",
        )
    if entry.tools == []:
        raise DefinitionError(
            where, f"{field}.tools", "lists no tools; leave it out to offer all of them"
        )
    for i, tool in enumerate(entry.tools or []):
        _check_offered(definitions, where, f"{field}.tools[{i}]", server, tool)


def check_mcp_tool(
    definitions: DefinitionTables, where: str, index: int, entry: str | ToolRef
) -> None:
    """A prompt's `server.tool` entry (a string) for a defined server: a tool it offers."""
    field = f"tools[{index}]"
    name = entry if isinstance(entry, str) else entry.name
    ref = single_tool_ref(name, definitions.mcp_servers)
    if ref is None:
        return
    server_name, tool = ref
    if isinstance(entry, ToolRef):
        # The runtime reads `server.tool` from plain strings only (contract.mcp.servers_of),
        # so an object entry of that name would silently offer nothing.
        raise DefinitionError(
            where,
            f"{field}.name",
            f"{name!r} is a tool of MCP server {server_name!r}: list it as the string "
            f"{name!r} or as {{mcp: {server_name}, tools: [{tool}]}}; an MCP entry takes "
            "no other fields",
        )
    _check_offered(definitions, where, field, definitions.mcp_servers[server_name], tool)


def unknown_tool_hint(definitions: DefinitionTables, name: str) -> str:
    """What an unknown dotted tool name would have needed to be an MCP server's tool."""
    head, dot, _ = name.partition(".")
    if not dot:
        return ""
    return (
        f"; as `server.tool` it would need an MCP server {head!r} (mcp/{head}.yaml), and "
        f"known servers are: {known_names(definitions.mcp_servers)}"
    )


def entry_label(entry: str | ToolRef | McpRef) -> str:
    """A tools entry as an error message shows it."""
    if isinstance(entry, McpRef):
        return f"{{mcp: {entry.mcp}}}"
    return entry if isinstance(entry, str) else entry.name


def _check_offered(
    definitions: DefinitionTables, where: str, field: str, server: McpServerDef, tool: str
) -> None:
    if not server.offers(tool):
        rule = (
            f"allow: [{', '.join(server.allow)}]"
            if server.allow is not None
            else f"deny: [{', '.join(server.deny or [])}]"
        )
        raise DefinitionError(
            where,
            field,
            f"MCP server {server.name!r} does not offer {tool!r}: its filter "
            f"({rule}, {definitions.where(MCP_KIND, server.name)}) leaves it out",
        )
    _refuse_bad_model_name(where, field, server, tool)


def _refuse_bad_model_name(where: str, field: str, server: McpServerDef, tool: str) -> None:
    """A tool named in the definitions must be callable: providers refuse other names."""
    name = server.model_name(tool)
    if not valid_model_tool_name(name):
        raise DefinitionError(
            where,
            field,
            f"MCP tool {tool!r} of server {server.name!r} would be offered to the model as "
            f"{name!r}, a name providers refuse (it must match {MODEL_TOOL_NAME_PATTERN})",
        )
