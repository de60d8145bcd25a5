"""The manifest of a thread bundle: what `weft thread export` writes and `import` reads.

A bundle is one zip file; `manifest.json` names its format and version and, for every
part, how many records it holds and the sha256 of its bytes (docs/export-import.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from weft.contract.wire import CamelModel

BUNDLE_FORMAT = "weft.thread-bundle"
# Bumped when a reader of an older weft could not read a newer bundle correctly.
BUNDLE_VERSION = 1
MANIFEST = "manifest.json"


class BundleError(ValueError):
    """A bundle that cannot be read or imported; the message names the part or field."""


class BundlePart(CamelModel):
    """One member of the bundle: its record count and the sha256 of its bytes."""

    name: str
    count: int = Field(ge=0, description="records (JSON lines), or 1 for a single document")
    sha256: str
    size: int = Field(ge=0, description="uncompressed bytes")


class EnvName(CamelModel):
    """An env entry of the thread row with its value left out."""

    name: str
    type: str


class HistoryRun(CamelModel):
    """One Temporal run of the thread, oldest first along the continue-as-new chain."""

    run_id: str
    part: str
    events: int


class BundleManifest(CamelModel):
    """What a bundle holds and how to check it."""

    format: Literal["weft.thread-bundle"] = "weft.thread-bundle"
    version: int = BUNDLE_VERSION
    weft_version: str
    thread_id: str
    source_namespace: str
    created_at: str
    parts: list[BundlePart]
    env: list[EnvName] = Field(
        default_factory=list, description="the thread's env names and types; values left out"
    )
    snapshot_ids: list[str] = Field(default_factory=list)
    histories: list[HistoryRun] = Field(default_factory=list)
    history_payloads: Literal["as-stored", "unavailable"] = Field(
        default="as-stored",
        description="encrypted payloads are kept encrypted; env-carrying plain ones redacted",
    )
    children: Literal["references"] = Field(
        default="references", description="child threads are listed by id, never included"
    )

    def part(self, name: str) -> BundlePart | None:
        """The part named `name`, or None."""
        return next((p for p in self.parts if p.name == name), None)
