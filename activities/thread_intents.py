"""The intents one ThreadState hands back to its workflow, and the error where it cannot.

A tool's intents travel back with its result (`tool.call`), an effect's with its outcome
(`effect.run`); a hook outside `tool.call` (model.call, thread.init) has nothing that
carries them, so there the methods that need one raise `IntentUnavailable` before they
change anything, instead of being dropped.
"""

from __future__ import annotations

from typing import Any

from weft.contract.activities import Intent


class IntentUnavailable(RuntimeError):
    """A hook asked for a workflow change where no result can carry it (not in tool.call)."""


class IntentSink:
    """The intents of one call, in the order asked; refused where `unavailable_in` says."""

    def __init__(self, unavailable_in: str | None = None) -> None:
        """`unavailable_in` names the activity where no result carries intents (None: one does)."""
        self.unavailable_in = unavailable_in
        self.intents: list[Intent] = []

    def require(self, kind: str) -> None:
        """Raise `IntentUnavailable` when `kind` cannot reach the workflow from here."""
        if self.unavailable_in is not None:
            raise IntentUnavailable(
                f"{kind} is not available to hooks in {self.unavailable_in}: nothing there "
                "carries it back to the workflow (use it from a tool, or from a tool.call hook)"
            )

    def add(self, kind: str, data: dict[str, Any]) -> None:
        """Ask the workflow for `kind` with `data` once the result carrying it is stored."""
        self.require(kind)
        self.intents.append(Intent.model_validate({"kind": kind, "data": data}))

    def withdraw(self, kind: str, intent_id: str) -> None:
        """Drop the `kind` intent whose data has `id` `intent_id` (asked and undone here)."""
        self.intents[:] = [
            i for i in self.intents if not (i.kind == kind and i.data.get("id") == intent_id)
        ]

    def join(self, others: list[Intent]) -> None:
        """Add the intents of a call made from this one (an invoked tool's), in order."""
        self.intents.extend(others)

    def nested(self) -> IntentSink:
        """The sink of a call made from this one: its own intents, the same refusal."""
        return IntentSink(self.unavailable_in)
