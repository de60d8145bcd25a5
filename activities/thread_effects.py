"""ThreadState's scheduled effects: schedule, list and remove (SPEC-NOTES "Effects").

Scheduling and removing are intents: the workflow owns the timers and applies them once the
result that carried them is stored. The id is made here, from the activity's own ids, so
a retried activity schedules the same effect. Reads go to the store (rows projected from
the effects' `job.*` events) and see this activity's own changes at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from weft.activities.thread_scope import ThreadScope
from weft.contract.effects import MAX_DELAY_MS, ScheduleEffectRequest
from weft.contract.validation import describe_validation_error

if TYPE_CHECKING:
    from weft.definitions import FunctionEffect


@dataclass
class EffectChanges:
    """What this activity scheduled and removed, not yet applied by the workflow."""

    catalog: Mapping[str, FunctionEffect] | None = None
    scheduled: dict[str, dict[str, Any]] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)


class ThreadEffects:
    """The effect methods of ThreadState, and what this call changed of the effects."""

    def __init__(self, scope: ThreadScope) -> None:
        self._scope = scope
        self._changes = EffectChanges()

    def use_effects(self, catalog: Mapping[str, FunctionEffect]) -> None:
        """Check names and arguments against the worker's effects when scheduling."""
        self._changes.catalog = catalog

    def schedule_effect(
        self, name: str, args: dict[str, Any] | None = None, delay_ms: int = 0
    ) -> str:
        """Schedule the effect `name` to run with `args` in `delay_ms` milliseconds; its id.

        The effect runs when its durable timer fires, at the thread's next step boundary
        (never beside a running step). Unknown names and invalid arguments raise here.
        """
        changes, scope = self._changes, self._scope
        args = dict(args or {})
        try:
            request = ScheduleEffectRequest(name=name, args=args, delay_ms=delay_ms)
        except ValidationError as err:
            raise ValueError(
                f"schedule_effect({name!r}): {describe_validation_error(err)}"
                f" (delay_ms must be 0..{MAX_DELAY_MS})"
            ) from None
        _check_against(changes.catalog, request)
        digest = hashlib.sha256(f"{scope.event_prefix}:effect{scope.number('effect')}".encode())
        effect_id = f"eff_{digest.hexdigest()[:20]}"
        now = datetime.now(UTC)
        scope.intents.add(
            "schedule_effect",
            {"id": effect_id, "name": name, "args": args, "delayMs": delay_ms},
        )
        changes.scheduled[effect_id] = {
            "id": effect_id,
            "name": name,
            "args": args,
            "scheduledAt": _iso(now + timedelta(milliseconds=delay_ms)),
            "createdAt": _iso(now),
        }
        return effect_id

    async def get_scheduled_effects(self, name: str | None = None) -> list[dict[str, Any]]:
        """Pending effects, soonest first: `{id, name, args, scheduledAt, createdAt}` each."""
        changes, scope = self._changes, self._scope
        stored = await scope.read(scope.store.effects.pending, scope.thread_id, name)
        listed = [
            {key: entry.get(key) for key in ("id", "name", "args", "scheduledAt", "createdAt")}
            for entry in stored
        ]
        listed += [e for e in changes.scheduled.values() if name is None or e["name"] == name]
        listed = [e for e in listed if e["id"] not in changes.removed]
        return sorted(listed, key=lambda e: (str(e["scheduledAt"]), str(e["id"])))

    async def remove_scheduled_effect(self, effect_id: str) -> bool:
        """Cancel a pending effect (its timer too); False when no such effect is pending."""
        changes, scope = self._changes, self._scope
        if effect_id in changes.removed:
            return False
        if effect_id in changes.scheduled:
            # Scheduled by this same activity: drop the request, the workflow never sees it.
            del changes.scheduled[effect_id]
            scope.intents.withdraw("schedule_effect", effect_id)
            return True
        row = await scope.read(scope.store.effects.get, scope.thread_id, effect_id)
        if row is None or row.status != "pending":
            return False
        scope.intents.add("remove_effect", {"id": effect_id})
        changes.removed.add(effect_id)
        return True


def _check_against(
    catalog: Mapping[str, FunctionEffect] | None, request: ScheduleEffectRequest
) -> None:
    """Refuse an effect the worker does not define, or arguments its model rejects."""
    if catalog is None:
        return  # the workflow checks the name against the thread's snapshot
    effect = catalog.get(request.name)
    if effect is None:
        known = ", ".join(sorted(catalog)) or "(none defined)"
        raise ValueError(f"unknown effect {request.name!r}; effects: {known}")
    try:
        effect.args.model_validate(request.args)
    except ValidationError as err:
        raise ValueError(
            f"invalid arguments for effect {request.name!r}: {describe_validation_error(err)}"
        ) from None


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
