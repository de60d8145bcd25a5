"""Failure texts for incidents, warnings and tool errors."""

from __future__ import annotations

from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.hooks import HOOK_BLOCKED, HookBlock


def failure_text(err: BaseException) -> str:
    """The error and its causes, outermost first, cut to 2,000 characters."""
    parts = []
    current: BaseException | None = err
    while current is not None:
        parts.append(str(current) or type(current).__name__)
        current = current.__cause__
    return ": ".join(p for p in parts if p)[:2000]


def hook_blocks(err: ActivityError) -> list[HookBlock]:
    """The refusals of `before_*` hooks, when that is why the activity failed (else [])."""
    cause = err.cause
    if not isinstance(cause, ApplicationError) or cause.type != HOOK_BLOCKED:
        return []
    return [HookBlock.model_validate(d) for d in cause.details if isinstance(d, dict)]
