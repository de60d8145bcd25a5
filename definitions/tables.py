"""What the checks and the snapshot read from a definition set: its tables by name, and where
each entry came from.

A protocol, so `validation.py`, `snapshot.py` and the checks beside them depend on the shape
of a set, not on `definition_set.py`, which calls them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from weft.contract.definitions import AgentDef, ModelDef, PromptDef
from weft.contract.mcp import McpServerDef
from weft.definitions.api import FunctionEffect, FunctionHook, FunctionTool


class DefinitionTables(Protocol):
    """A definition set as its readers see it (`Definitions` is the one implementation)."""

    @property
    def models(self) -> Mapping[str, ModelDef]: ...
    @property
    def prompts(self) -> Mapping[str, PromptDef]: ...
    @property
    def agents(self) -> Mapping[str, AgentDef]: ...
    @property
    def tools(self) -> Mapping[str, FunctionTool]: ...
    @property
    def hooks(self) -> Mapping[str, FunctionHook]: ...
    @property
    def effects(self) -> Mapping[str, FunctionEffect]: ...
    @property
    def mcp_servers(self) -> Mapping[str, McpServerDef]: ...

    def where(self, kind: str, name: str) -> str:
        """Where the `kind` definition `name` came from (its file), for error messages."""
        ...
