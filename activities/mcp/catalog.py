"""Tool catalogues from an MCP server's listing: filtered, checked, content-addressed.

Pure functions shared by `tool.catalog` (which records a catalogue) and `tool.call`
(which digests the list a server re-listed after `list_changed`), so both apply the same
filter and checks and agree on the digest.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from typing import Any, Literal

from jsonschema import Draft202012Validator, exceptions

from weft.activities.mcp.types import ListedTool
from weft.contract.context import READ_OUTPUT_TOOL
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.mcp import (
    MODEL_TOOL_NAME_PATTERN,
    McpServerCatalog,
    McpServerDef,
    McpToolSpec,
    valid_model_tool_name,
)

CATALOG_ID_PREFIX = "mcpcat_"
# A checker's message can quote a whole schema: a warning keeps this much of it.
_MAX_PROBLEM_CHARS = 300


def reserved_names(snapshot: DefinitionSnapshot) -> set[str]:
    """Tool names an MCP tool may not take: the snapshot's own tools win, and weft's pager."""
    return {*snapshot.tools, READ_OUTPUT_TOOL}


def catalog_tools(
    server: McpServerDef, listed: Sequence[ListedTool], reserved: Collection[str]
) -> tuple[list[McpToolSpec], list[str]]:
    """The tools of `listed` the server's filter offers and the checks accept, in listing
    order, and a warning for each one skipped (naming the server, the tool and why)."""
    tools: list[McpToolSpec] = []
    warnings: list[str] = []
    taken: set[str] = set()
    for item in listed:
        if not server.offers(item.name):
            continue
        name = server.model_name(item.name)
        problem = _problem(name, item.input_schema, reserved, taken)
        if problem is not None:
            warnings.append(f"MCP server {server.name!r}: tool {item.name!r} skipped: {problem}")
            continue
        taken.add(name)
        tools.append(
            McpToolSpec(
                name=name,
                server=server.name,
                tool=item.name,
                description=item.description or "",
                # Providers want an object schema at the root; an untyped one is one.
                parameters={"type": "object", **item.input_schema},
                annotations=item.annotations,
            )
        )
    return tools, warnings


def tools_digest(tools: Sequence[McpToolSpec]) -> str:
    """sha256 of what the model is offered (name, tool, description, parameters)."""
    return _sha256(
        [
            {
                "name": t.name,
                "tool": t.tool,
                "description": t.description,
                "parameters": t.parameters,
            }
            for t in tools
        ]
    )


def ready_catalog(
    server: McpServerDef,
    listed: Sequence[ListedTool],
    *,
    reserved: Collection[str],
    resolved_at: str,
) -> McpServerCatalog:
    """The catalogue of a server that listed `listed`."""
    tools, warnings = catalog_tools(server, listed, reserved)
    return _catalog(server.name, "ready", None, tools, warnings, resolved_at)


def failed_catalog(server: str, error: str, *, resolved_at: str) -> McpServerCatalog:
    """The catalogue of a server that could not be listed: no tools, and why."""
    return _catalog(server, "failed", error, [], [], resolved_at)


def _catalog(
    server: str,
    status: Literal["ready", "failed"],
    error: str | None,
    tools: list[McpToolSpec],
    warnings: list[str],
    resolved_at: str,
) -> McpServerCatalog:
    # Content-addressed without `resolved_at`: the same listing is the same catalogue.
    content = {
        "server": server,
        "status": status,
        "error": error,
        "tools": [t.model_dump(mode="json") for t in tools],
        "warnings": warnings,
    }
    return McpServerCatalog(
        catalog_id=CATALOG_ID_PREFIX + _sha256(content),
        server=server,
        status=status,
        error=error,
        tools=tools,
        digest=tools_digest(tools),
        warnings=warnings,
        resolved_at=resolved_at,
    )


def _problem(name: str, schema: Any, reserved: Collection[str], taken: set[str]) -> str | None:
    """Why the tool the model would call `name`, with input schema `schema`, is not offered."""
    if not valid_model_tool_name(name):
        return f"its name {name!r} does not match {MODEL_TOOL_NAME_PATTERN} (as providers require)"
    if name in reserved:
        return f"its name {name!r} is taken by a tool of the thread's own definitions"
    if name in taken:
        return f"the server lists {name!r} twice"
    if not isinstance(schema, dict):
        return f"its inputSchema is not a JSON object (got {type(schema).__name__})"
    if schema.get("type", "object") != "object":
        return f'its inputSchema has "type": {json.dumps(schema["type"])}, not "object"'
    try:
        Draft202012Validator.check_schema(schema)
    except exceptions.SchemaError as err:
        at = "/".join(str(p) for p in err.absolute_path) or "(root)"
        return f"its inputSchema is not a valid JSON Schema at {at}: {_cut(err.message)}"
    except Exception as err:  # a schema the checker itself cannot walk is just as unusable
        return f"its inputSchema could not be checked: {type(err).__name__}: {_cut(str(err))}"
    return None


def _sha256(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_PROBLEM_CHARS else text[:_MAX_PROBLEM_CHARS] + "…"
