"""A definitions version: the digest of a snapshot's specs, and what differs between two.

Pure, so the workflow computes the digest of the snapshot it carries (the same on every
replay) and the worker computes it of the definitions it serves.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field

from weft.contract.definitions import DefinitionSnapshot
from weft.contract.wire import CamelModel

# kind -> name -> that definition's spec as plain JSON.
DefinitionsContent = dict[str, dict[str, Any]]


class DefinitionChange(CamelModel):
    """One definition that differs between two versions, by kind and name."""

    kind: str
    name: str
    change: Literal["added", "removed", "changed"]


def snapshot_digest(snapshot: DefinitionSnapshot) -> str:
    """The sha256 hex of the canonical JSON of the snapshot's specs."""
    return content_digest(snapshot_content(snapshot))


def snapshot_content(snapshot: DefinitionSnapshot) -> DefinitionsContent:
    """The snapshot's agents, prompts, models, tools, hooks, effects and MCP servers."""
    return specs_content(
        agents={snapshot.agent.name: snapshot.agent, **snapshot.agents},
        prompts=snapshot.prompts,
        models=snapshot.models,
        tools=snapshot.tools,
        hooks=snapshot.hooks,
        effects=snapshot.effects,
        mcp_servers=snapshot.mcp_servers,
    )


def specs_content(**kinds: Mapping[str, BaseModel]) -> DefinitionsContent:
    """Each spec as JSON by kind and name; empty kinds are left out, so a kind added to
    weft later does not change the digests of definitions that do not use it."""
    return {
        kind: {name: spec.model_dump(mode="json", by_alias=True) for name, spec in table.items()}
        for kind, table in kinds.items()
        if table
    }


def content_digest(content: DefinitionsContent) -> str:
    """The sha256 hex of `content` as canonical JSON."""
    return hashlib.sha256(canonical_json(content).encode()).hexdigest()


def canonical_json(content: DefinitionsContent) -> str:
    """One spelling of `content` (sorted keys, no spaces, ASCII): the digest is taken of it."""
    return json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def changed_definitions(old: DefinitionsContent, new: DefinitionsContent) -> list[DefinitionChange]:
    """What differs between two versions, sorted by kind then name."""
    changes: list[DefinitionChange] = []
    for kind in sorted(set(old) | set(new)):
        before, after = old.get(kind, {}), new.get(kind, {})
        for name in sorted(set(before) | set(after)):
            if name not in before:
                changes.append(DefinitionChange(kind=kind, name=name, change="added"))
            elif name not in after:
                changes.append(DefinitionChange(kind=kind, name=name, change="removed"))
            elif before[name] != after[name]:
                changes.append(DefinitionChange(kind=kind, name=name, change="changed"))
    return changes


# The refresh a turn boundary runs (a local activity on the workflow's own worker), and the
# update that moves a pinned thread: stable names, a public contract.
ACTIVITY_DEFINITIONS_REFRESH = "definitions.refresh"
UPDATE_UPGRADE_DEFINITIONS = "upgrade_definitions"
POLICY_CHANGED = "policy.changed"
# The error type of a `model.call` whose `definitionsCheck` found the worker's version
# differs (or that it cannot serve the agent): its one detail is the DefinitionsRefreshResult.
DEFINITIONS_CHANGED = "DefinitionsChanged"


class DefinitionsRefreshInput(CamelModel):
    """The thread's version, for the worker to compare with the definitions it serves."""

    thread_id: str
    agent: str
    snapshot_id: str
    digest: str


class DefinitionsRefreshResult(CamelModel):
    """The worker's newer version of the thread's agent, or nothing when it has the same.

    `snapshot` is None when the digests are equal, or when the worker cannot serve the
    agent at all (`refused` says why: the thread keeps its version).
    """

    snapshot: DefinitionSnapshot | None = None
    digest: str | None = None
    changes: list[DefinitionChange] = Field(default_factory=list)
    refused: str | None = None


class UpgradeResult(CamelModel):
    """What `upgrade_definitions` did: moved the thread now (`upgraded`), found it on the
    newest version already (`unchanged`), or will move it when its running turn ends
    (`pending`)."""

    status: Literal["upgraded", "unchanged", "pending"]
    previous_digest: str | None = None
    digest: str | None = None
    changes: list[DefinitionChange] = Field(default_factory=list)
