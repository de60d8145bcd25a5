"""The state of the thread's parts that is carried across continue-as-new as it is.

Each part keeps its own model here (the workflow holds the same objects), so a new field
is one edit. On the wire the parts are flat in `ThreadCarryOver`, as they were before
they were parts: carry-overs recorded in histories, and sent by runs of older code, still
decode (`flat_parts`, `nest_flat_parts`; tests/unit/test_carry_wire.py proves it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer, TypeAdapter
from pydantic.alias_generators import to_camel, to_snake

from weft.contract.actions import ActionResolution, PendingAction
from weft.contract.effects import ScheduledEffect
from weft.contract.subagents import RegistryEntry, SpawnRequest
from weft.contract.wire import CamelModel

# Resolved actions remembered across runs, so a late answer is told it came too late.
CARRIED_RESOLVED = 100

M = TypeVar("M", bound=BaseModel)


def keyed_by(item: type[M], key: Callable[[M], str | None]) -> BeforeValidator:
    """Read a list of `item` (the wire's shape) as a dict by `key`; entries without one are
    dropped. A dict (the part's own shape) passes as it is."""
    entries = TypeAdapter(list[item])  # type: ignore[valid-type]

    def read(value: object) -> object:
        if not isinstance(value, list):
            return value
        return {k: e for e in entries.validate_python(value) if (k := key(e))}

    return BeforeValidator(read)


def as_list(item: type[M], *, newest: int | None = None) -> PlainSerializer:
    """Write a dict's values as a list (the `newest` last ones, when bounded)."""

    def write(value: dict[str, M]) -> list[M]:
        values = list(value.values())
        return values if newest is None else values[-newest:]

    return PlainSerializer(write, return_type=list[item])  # type: ignore[valid-type]


SORTED = PlainSerializer(sorted, return_type=list[str])


class SubagentBook(CamelModel):
    """The parent's record of its subagents (Runtime §7)."""

    # The registry, by child thread id.
    children: Annotated[
        dict[str, RegistryEntry],
        keyed_by(RegistryEntry, lambda e: e.reference),
        as_list(RegistryEntry),
    ] = Field(default_factory=dict)
    # Subagents waiting on scoped variables (Runtime §7.5), by variable request id.
    deferred: Annotated[
        dict[str, SpawnRequest],
        keyed_by(SpawnRequest, lambda s: s.scoped_env_request),
        as_list(SpawnRequest),
    ] = Field(
        default_factory=dict,
        alias="deferredSpawns",
        description="subagents waiting on scoped variables (§7.5)",
    )
    # Prompts whose immediate subagents have been started (Runtime §7.3).
    immediate_done: Annotated[set[str], SORTED] = Field(
        default_factory=set, description="prompts whose immediate subagents were started"
    )


class ActionBook(CamelModel):
    """Human-in-the-loop: pending and resolved actions by id, and session approvals."""

    pending: Annotated[
        dict[str, PendingAction],
        keyed_by(PendingAction, lambda a: a.action_id),
        as_list(PendingAction),
    ] = Field(default_factory=dict, alias="pendingActions")
    resolved: Annotated[
        dict[str, ActionResolution],
        keyed_by(ActionResolution, lambda r: r.action_id),
        as_list(ActionResolution, newest=CARRIED_RESOLVED),
    ] = Field(default_factory=dict, alias="resolvedActions")
    session_allowed_tools: Annotated[set[str], SORTED] = Field(default_factory=set)


class EffectBook(CamelModel):
    """The thread's pending effects (carried, due ones too) and those whose timers fired."""

    pending: Annotated[
        dict[str, ScheduledEffect],
        keyed_by(ScheduledEffect, lambda e: e.id),
        PlainSerializer(
            lambda pending: sorted(pending.values(), key=_soonest),
            return_type=list[ScheduledEffect],
        ),
    ] = Field(
        default_factory=dict,
        alias="effects",
        description="pending scheduled effects, with their due times",
    )
    # This run's fired timers; the next run starts a timer for each pending effect again.
    due: list[str] = Field(default_factory=list, exclude=True)

    def listed(self) -> list[ScheduledEffect]:
        """Pending effects, soonest first (as `thread_read` lists them)."""
        return sorted(self.pending.values(), key=_soonest)


def _soonest(effect: ScheduledEffect) -> tuple[str, str]:
    return (effect.scheduled_at, effect.id)


def flat_keys(part: type[BaseModel]) -> dict[str, str]:
    """The keys a part's fields have in a flat carry-over (each field's alias, and its
    snake_case spelling for Python callers), mapped to the alias."""
    keys = {}
    for name, info in part.model_fields.items():
        alias = info.alias or name
        keys[alias] = keys[to_snake(alias)] = alias
    return keys


def nest_flat_parts(data: dict[str, Any], parts: dict[str, type[BaseModel]]) -> dict[str, Any]:
    """Gather each part's flat keys under the part's name (a nested part passes as is)."""
    data = dict(data)
    for name, part in parts.items():
        if name in data or to_camel(name) in data:
            continue
        keys = flat_keys(part)
        data[name] = {keys[key]: data.pop(key) for key in list(data) if key in keys}
    return data


def flat_parts(data: dict[str, Any], parts: dict[str, type[BaseModel]]) -> dict[str, Any]:
    """Spread each part's written fields into the carry-over, as the wire has them."""
    for name in parts:
        written = data.pop(to_camel(name), None) or data.pop(name, None)
        if isinstance(written, dict):
            data.update(written)
    return data
