"""Helpers for unit tests of the pure workflow parts: a fixed context, memories, snapshots.

These run without a worker or a dev server: `ThreadMemory` takes its time, ids and logs
from a `Context`, which here is a fixed clock and a counter.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from weft.contract.definitions import AgentDef, DefinitionSnapshot, ModelDef, PromptDef
from weft.contract.thread import ThreadStartInput
from weft.workflows.thread_state import ThreadMemory

NOW = datetime(2026, 11, 23, 12, 0, 0, tzinfo=UTC)


class FixedContext:
    """A clock that stands still, ids from a counter, and warnings kept in a list."""

    def __init__(self) -> None:
        self.ids = 0
        self.warnings: list[str] = []

    def now(self) -> datetime:
        return NOW

    def new_hex(self) -> str:
        self.ids += 1
        return f"{self.ids:04d}"

    def warning(self, message: str) -> None:
        self.warnings.append(message)

    def correlation(self) -> dict[str, str]:
        return {"run_id": "run_1"}


def snapshot(**agent: Any) -> DefinitionSnapshot:
    """A snapshot of one agent `helper` with prompt `p` on model `m`."""
    return DefinitionSnapshot(
        snapshot_id="snap_1",
        agent=AgentDef.model_validate({"name": "helper", "sideA": {"prompt": "p"}, **agent}),
        prompts={"p": PromptDef(name="p", tool_description="helps", prompt="Hi.", model="m")},
        models={"m": ModelDef(name="m", provider="openai", model="gpt")},
        tools={},
    )


def memory(*, loaded: bool = True, **start: Any) -> ThreadMemory:
    """A fresh thread's memory; `loaded` puts a snapshot in as thread.init would."""
    return ThreadMemory(
        thread_id="t1",
        start=ThreadStartInput.model_validate({"agent": "helper", **start}),
        context=FixedContext(),
        snapshot=snapshot() if loaded else None,
    )
