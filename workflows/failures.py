"""Failure texts for incidents, warnings and tool errors."""

from __future__ import annotations


def failure_text(err: BaseException) -> str:
    """The error and its causes, outermost first, cut to 2,000 characters."""
    parts = []
    current: BaseException | None = err
    while current is not None:
        parts.append(str(current) or type(current).__name__)
        current = current.__cause__
    return ": ".join(p for p in parts if p)[:2000]
