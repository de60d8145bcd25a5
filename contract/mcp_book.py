"""What a thread remembers of its MCP servers: their tool catalogues, and which are due to
be listed again. Pure, carried across continue-as-new as it is (flat in `ThreadCarryOver`:
`mcpCatalogs`, `mcpDue`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated

from pydantic import Field

from weft.contract.carry_parts import as_list, keyed_by
from weft.contract.definitions import PromptDef
from weft.contract.mcp import (
    CatalogReason,
    McpCallOutcome,
    McpServerCatalog,
    McpToolSpec,
    offered_mcp_tools,
    servers_of,
)
from weft.contract.wire import CamelModel


class McpBook(CamelModel):
    """The catalogue of each MCP server the thread has listed, as last listed."""

    catalogs: Annotated[
        dict[str, McpServerCatalog],
        keyed_by(McpServerCatalog, lambda c: c.server),
        as_list(McpServerCatalog),
    ] = Field(
        default_factory=dict,
        alias="mcpCatalogs",
        description="the MCP servers' tool catalogues, as last listed",
    )
    # Servers to list again before a prompt that uses them next calls its model.
    due: dict[str, CatalogReason] = Field(
        default_factory=dict,
        alias="mcpDue",
        description="MCP servers to list again before their next use",
    )

    def servers(self, prompt: PromptDef, defined: Iterable[str]) -> list[str]:
        """The MCP servers `prompt` uses (of those the snapshot defines)."""
        return servers_of(prompt.tools, defined)

    def to_list(self, prompt: PromptDef, defined: Iterable[str]) -> dict[str, CatalogReason]:
        """The servers `prompt` uses that must be listed now, and why."""
        wanted: dict[str, CatalogReason] = {}
        for server in self.servers(prompt, defined):
            if server not in self.catalogs:
                wanted[server] = "prompt_active"
            elif server in self.due:
                wanted[server] = self.due[server]
        return wanted

    def resolved(self, catalogs: dict[str, McpServerCatalog]) -> None:
        """Keep fresh listings; they are no longer due."""
        self.catalogs.update(catalogs)
        for server in catalogs:
            self.due.pop(server, None)

    def ids(self) -> dict[str, str]:
        """Server → catalogue id, for `model.call` (which loads them from the store)."""
        return {name: c.catalog_id for name, c in self.catalogs.items() if c.catalog_id}

    def tool(self, prompt: PromptDef, name: str) -> McpToolSpec | None:
        """The MCP tool `prompt` offers under `name`, if any."""
        for spec in offered_mcp_tools(prompt.tools, self.catalogs):
            if spec.name == name:
                return spec
        return None

    def clashes(self, prompt: PromptDef) -> list[str]:
        """Names `prompt` would offer from two servers: the first server listed wins."""
        offered_by: dict[str, list[str]] = {}
        for server in servers_of(prompt.tools, self.catalogs):
            one = {server: self.catalogs[server]}
            for spec in offered_mcp_tools(prompt.tools, one):
                offered_by.setdefault(spec.name, []).append(server)
        return [
            f"prompt {prompt.name!r} offers tool {name!r} of MCP server {servers[0]!r}; "
            f"{', '.join(map(repr, servers[1:]))} has one by that name too, not offered "
            "(give one server a `prefix`)"
            for name, servers in offered_by.items()
            if len(servers) > 1
        ]

    def observe(self, outcome: McpCallOutcome | None) -> None:
        """A call found the server's tool list changed: list it again before the next step."""
        if outcome is None or outcome.digest is None:
            return
        known = self.catalogs.get(outcome.server)
        if known is not None and known.digest != outcome.digest:
            self.due[outcome.server] = "list_changed"

    def request_refresh(self, servers: Iterable[str]) -> None:
        """An explicit `refresh_tools`: list these again before their next use."""
        for server in servers:
            self.due[server] = "refresh"
