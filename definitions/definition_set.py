"""The set of definitions a worker serves: cross-checked at start-up, snapshotted per thread.

Checks live in `validation.py`, snapshots in `snapshot.py`; this module only keeps the
definitions by name and remembers where each came from, for error messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, TypeVar

from weft.contract.definitions import AgentDef, DefinitionSnapshot, ModelDef, PromptDef
from weft.contract.mcp import McpServerDef
from weft.definitions.api import FunctionEffect, FunctionHook, FunctionTool
from weft.definitions.errors import DefinitionError
from weft.definitions.mcp_checks import MCP_KIND
from weft.definitions.snapshot import build_snapshot
from weft.definitions.validation import check_definitions


class _Named(Protocol):
    @property
    def name(self) -> str: ...


Named = TypeVar("Named", bound=_Named)

# What `Definitions.add` takes.
Definable = (
    ModelDef | PromptDef | AgentDef | FunctionTool | FunctionHook | FunctionEffect | McpServerDef
)


@dataclass
class Definitions:
    """Models, prompts, agents, function tools, hooks (by id), effects and MCP servers, with
    where each came from.

    `root` is the directory `load_directory` read them from (None when built in Python): a
    stdio MCP server's relative `cwd`, and its default one, are resolved against it when a
    session is opened.
    """

    models: dict[str, ModelDef] = field(default_factory=dict)
    prompts: dict[str, PromptDef] = field(default_factory=dict)
    agents: dict[str, AgentDef] = field(default_factory=dict)
    tools: dict[str, FunctionTool] = field(default_factory=dict)
    hooks: dict[str, FunctionHook] = field(default_factory=dict)
    effects: dict[str, FunctionEffect] = field(default_factory=dict)
    mcp_servers: dict[str, McpServerDef] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    root: Path | None = None

    def add(
        self,
        *items: Definable,
        source: str | None = None,
    ) -> Definitions:
        """Add definitions made in Python; a second definition of a name is an error."""
        for item in items:
            if isinstance(item, ModelDef):
                self._add("model", self.models, item, source)
            elif isinstance(item, PromptDef):
                self._add("prompt", self.prompts, item, source)
            elif isinstance(item, AgentDef):
                self._add("agent", self.agents, item, source)
            elif isinstance(item, FunctionTool):
                self._add("tool", self.tools, item, source)
            elif isinstance(item, FunctionHook):
                if not item.id:
                    where = source or f"hook for {item.hook!r} (Python)"
                    raise DefinitionError(where, "id", "is required (or use hooks/<id>.py)")
                self._add("hook", self.hooks, item, source)
            elif isinstance(item, FunctionEffect):
                self._add("effect", self.effects, item, source)
            elif isinstance(item, McpServerDef):
                self._add(MCP_KIND, self.mcp_servers, item, source)
            else:
                raise TypeError(f"cannot add {type(item).__name__} to definitions")
        return self

    def validate(self, *, providers: Iterable[str] | None = None) -> None:
        """Check every cross-reference; raise DefinitionError naming the file and field."""
        check_definitions(self, providers)

    def snapshot(self, agent_name: str) -> DefinitionSnapshot:
        """Freeze what `agent_name` needs: its prompts, models (with fallbacks) and tools."""
        return build_snapshot(self, agent_name)

    def where(self, kind: str, name: str) -> str:
        """Where the `kind` definition `name` came from (its file), for error messages."""
        return self.sources.get(f"{kind}:{name}", f"{kind} {name!r}")

    def _add(self, kind: str, table: dict[str, Named], item: Named, source: str | None) -> None:
        where = source or f"{kind} {item.name!r} (Python)"
        if not item.name:
            raise DefinitionError(where, "name", "is required")
        if item.name in table:
            first = self.sources.get(f"{kind}:{item.name}", "elsewhere")
            raise DefinitionError(
                where, "name", f"{kind} {item.name!r} is already defined in {first}"
            )
        table[item.name] = item
        self.sources[f"{kind}:{item.name}"] = where
