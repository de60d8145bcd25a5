"""Scheduled effects (Runtime §2 "Scheduled effect", ThreadState `scheduleEffect`).

An effect is worker code, defined like a tool (`effects/<name>.py`, `define_effect`). A
scheduled effect is a durable timer in the thread's workflow; when it fires the effect
runs as the `effect.run` activity with a ThreadState, at a step boundary, never beside a
running step (Runtime §11). Its lifecycle is recorded with the Agent Runtime `job.*`
events (seed 001 "Jobs: batch and background work"), each carrying the effect entry.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from weft.contract.activities import Intent
from weft.contract.events import Event
from weft.contract.wire import CamelModel

SIGNAL_SCHEDULE_EFFECT = "schedule_effect"
UPDATE_SCHEDULE_EFFECT_CHECKED = "schedule_effect_checked"
SIGNAL_REMOVE_EFFECT = "remove_scheduled_effect"
UPDATE_REMOVE_EFFECT_CHECKED = "remove_scheduled_effect_checked"
ACTIVITY_EFFECT_RUN = "effect.run"

# Effect names follow tool names; ids are weft's or the caller's (an idempotency key).
EFFECT_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]{0,127}$"
EFFECT_ID_PATTERN = r"^[A-Za-z0-9_\-:.]{1,128}$"
# Ten years: longer than any thread should wait, short enough to catch a unit mistake
# (a delay given in microseconds, say).
MAX_DELAY_MS = 10 * 365 * 24 * 3600 * 1000
# The `job.*` events' payload says which kind of job: effects are one.
JOB_KIND = "effect"

EffectStatus = Literal["pending", "running", "completed", "failed", "removed"]


class ScheduledEffect(CamelModel):
    """A pending effect, as `get_scheduled_effects` and `thread_read` list it."""

    id: str
    name: str
    args: dict[str, Any] = Field(default_factory=dict)
    scheduled_at: str = Field(description="when it is due (ISO-8601 UTC)")
    created_at: str = Field(description="when it was scheduled (ISO-8601 UTC)")
    scheduled_by: str | None = Field(
        default=None, description="who scheduled it: a tool call, an effect, a hook, a signal"
    )


class ScheduleEffectRequest(CamelModel):
    """Schedule `name` with `args` after `delay_ms`: a signal, an update, or an intent.

    `id` is optional; given, it makes the request idempotent (a second request with a
    pending id changes nothing and says `exists`).
    """

    name: str = Field(pattern=EFFECT_NAME_PATTERN)
    args: dict[str, Any] = Field(default_factory=dict)
    delay_ms: int = Field(default=0, ge=0, le=MAX_DELAY_MS)
    id: str | None = Field(default=None, pattern=EFFECT_ID_PATTERN)


class ScheduleEffectResult(CamelModel):
    """What the `schedule_effect_checked` update answers."""

    id: str
    status: Literal["scheduled", "exists"]
    scheduled_at: str


class RemoveEffectRequest(CamelModel):
    """Remove a pending effect by id (a signal, an update, or an intent)."""

    id: str = Field(pattern=EFFECT_ID_PATTERN)


class RemoveEffectResult(CamelModel):
    """What the `remove_scheduled_effect_checked` update answers: False when not pending."""

    id: str
    removed: bool


class EffectRunInput(CamelModel):
    """Run one due effect with a ThreadState (the `effect.run` activity)."""

    thread_id: str
    session_id: str | None = None
    snapshot_id: str
    agent: str | None = Field(default=None, description="the active agent after a handoff")
    effect: ScheduledEffect
    fired_at: str
    max_attempts: int = Field(
        default=3, ge=1, description="attempts for an effect that raises; the last records it"
    )
    outbox: list[Event] = Field(default_factory=list)


class EffectRunResult(CamelModel):
    """How the effect ended, and the ThreadState changes it asked for.

    `replayed` is True when the effect had already completed (a retried activity whose
    first attempt finished): its recorded intents are returned and it is not run again.
    """

    status: Literal["completed", "failed"]
    error: str | None = None
    error_code: str | None = None
    intents: list[Intent] = Field(default_factory=list)
    replayed: bool = False
