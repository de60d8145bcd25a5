"""ThreadState's own events: `emit`, `progress` and `record_redacted`.

Each is written at once, after what the running call owes (thread_writes.py), under an id
numbered per kind in the call, so a retried tool writes each fact once.
"""

from __future__ import annotations

from typing import Any

from weft.activities.thread_scope import ThreadScope


class ThreadFacts:
    """The facts a tool, hook or effect records for its thread."""

    def __init__(self, scope: ThreadScope, *, has_call: bool) -> None:
        """`has_call`: the state runs for a call of its own (a tool call or an effect)."""
        self._scope = scope
        self._has_call = has_call

    async def emit(self, event: str, data: Any = None) -> None:
        """Record a custom fact as a `run.status` event carrying the tool's name for it."""
        scope = self._scope
        suffix = f"emit{scope.number('emit')}"
        await scope.append([scope.event("run.status", suffix, {"event": event, "data": data})])

    async def progress(
        self, message: str, *, fraction: float | None = None, data: Any = None
    ) -> None:
        """A `tool.progress` event of the running call; `fraction` from 0 to 1 or None."""
        if not self._has_call:
            # A hook's state: no running tool call or effect that the progress is of.
            raise RuntimeError(
                "progress is available to tools and effects, not hooks: a hook runs for "
                "no tool call of its own"
            )
        if not isinstance(message, str) or not message:
            raise ValueError("progress: `message` must be a non-empty string")
        if fraction is not None and not (
            isinstance(fraction, int | float) and 0.0 <= fraction <= 1.0
        ):
            raise ValueError(f"progress: `fraction` must be a number from 0 to 1, not {fraction!r}")
        scope = self._scope
        payload: dict[str, Any] = {"message": message, "fraction": fraction, "data": data}
        suffix = f"progress{scope.number('progress')}"
        await scope.append([scope.event("tool.progress", suffix, payload)])

    async def record_redacted(self, field: str, values: int) -> None:
        """`output.redacted`: `values` secret occurrences masked in `field` of the output."""
        scope = self._scope
        payload = {"field": field, "occurrences": values}
        suffix = f"redacted{scope.number('redacted')}"
        await scope.append([scope.event("output.redacted", suffix, payload)])
