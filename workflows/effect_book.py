"""The thread's scheduled effects as `ThreadMemory` keeps them (workflows/effects.py runs them)."""

from __future__ import annotations

from dataclasses import dataclass, field

from weft.contract.effects import ScheduledEffect


@dataclass
class EffectBook:
    """The thread's pending effects (carried across runs) and those whose timers fired."""

    pending: dict[str, ScheduledEffect] = field(default_factory=dict)
    due: list[str] = field(default_factory=list)

    def listed(self) -> list[ScheduledEffect]:
        """Pending effects, soonest first (as `thread_read` lists them)."""
        return sorted(self.pending.values(), key=lambda e: (e.scheduled_at, e.id))

    def carry(self) -> list[ScheduledEffect]:
        """What the next run gets: every pending effect with its due time (due ones too)."""
        return self.listed()

    @classmethod
    def restore(cls, carried: list[ScheduledEffect]) -> EffectBook:
        """The book of a continued run; its timers are started by `EffectTimers`."""
        return cls(pending={effect.id: effect for effect in carried})
