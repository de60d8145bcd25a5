"""The definitions version: a sha256 of the definitions' specs, in one canonical JSON.

The same definitions give the same digest on every worker and in every process, so a digest
names one version of an agent's prompts, tools, models and hooks: a thread records the one
it runs with (`contract/definitions_version.py`), the store keeps each version once, and a
worker's build id can include the digest of the whole set it serves.
"""

from __future__ import annotations

from weft.contract.definitions import DefinitionSnapshot
from weft.contract.definitions_version import (
    DefinitionsContent,
    content_digest,
    snapshot_content,
    specs_content,
)
from weft.contract.hooks import HookSpec
from weft.definitions.tables import DefinitionTables


def definitions_digest(defs: DefinitionTables | DefinitionSnapshot) -> str:
    """The sha256 hex of the canonical JSON of `defs`' specs (a whole set or one snapshot)."""
    return content_digest(definitions_content(defs))


def definitions_content(defs: DefinitionTables | DefinitionSnapshot) -> DefinitionsContent:
    """Each definition's spec by kind and name. Function bodies are not content (a worker
    runs a tool or hook by name); their specs are."""
    if isinstance(defs, DefinitionSnapshot):
        return snapshot_content(defs)
    return specs_content(
        agents=defs.agents,
        prompts=defs.prompts,
        models=defs.models,
        tools={name: tool.spec() for name, tool in defs.tools.items()},
        hooks={i: HookSpec(id=i, hook=hook.hook) for i, hook in defs.hooks.items()},
        effects={name: effect.spec() for name, effect in defs.effects.items()},
        mcp_servers=defs.mcp_servers,
    )
