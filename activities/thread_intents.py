"""Whether a ThreadState can hand intents back to its workflow, and the error when it cannot.

A tool's intents travel back with its result (`tool.call`); a hook outside `tool.call`
(model.call, thread.init) has nothing that carries them, so there the methods that need
one raise `IntentUnavailable` before they change anything, instead of being dropped.
"""

from __future__ import annotations


class IntentUnavailable(RuntimeError):
    """A hook asked for a workflow change where no result can carry it (not in tool.call)."""


def require_intents(kind: str, unavailable_in: str | None) -> None:
    """Raise `IntentUnavailable` when `unavailable_in` names where `kind` cannot be applied."""
    if unavailable_in is not None:
        raise IntentUnavailable(
            f"{kind} is not available to hooks in {unavailable_in}: nothing there "
            "carries it back to the workflow (use it from a tool, or from a tool.call hook)"
        )
