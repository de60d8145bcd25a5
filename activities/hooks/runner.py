"""Running the hooks in scope at one hook point, inside the activity that produces the fact.

Each run is recorded as `hook.started` then `hook.completed` or `hook.failed` (Agent Runtime
events) with its duration. `hook.started` is written before the hook runs, so whatever the
hook itself writes (`state.emit`, a value) follows it in the log; the end event waits for
the activity's next commit (`take_events`) or for `flush`. Event ids come from the
activity's own ids (its attempt included), the point, a per-point counter and the hook id:
a retried attempt writes its own, a rerun of the same attempt writes nothing twice.
"""

from __future__ import annotations

import asyncio
import copy
import time
import traceback
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.trace import Span
from pydantic import ValidationError
from temporalio import activity

from weft.activities.spans import Spans, failed
from weft.activities.streaming import Heartbeater
from weft.contract.events import Event
from weft.contract.hooks import BLOCKING_HOOKS, HookBlock, HookName, HookSpec
from weft.contract.validation import describe_validation_error
from weft.definitions.api import FunctionHook, HookBlocked

# (suffix, type, payload) -> the activity's event: its envelope, its id scheme.
EventMaker = Callable[[str, str, dict[str, Any]], Event]
EventSink = Callable[[list[Event]], Awaitable[None]]
# Builds the ThreadState the hooks get, at the first hook that runs. The runner only hands
# it to them, so it is `object` here: ThreadState's messages run the message hooks
# through this runner, and the runner must not import ThreadState back.
StateFactory = Callable[[], Awaitable[object]]
# A returned value -> (the value to use, repairs to warn about); raises when unusable.
Check = Callable[[Any], tuple[Any, list[str]]]

# Points whose return value is ignored (they observe a fact already written).
OBSERVING_HOOKS = frozenset(
    {
        "after_thread_created",
        "after_subagent_created",
        "after_create_message",
        "after_update_message",
    }
)


@dataclass(frozen=True)
class HookOutcome:
    """What the hooks of one point made of its data: the data to use, or a refusal."""

    data: Any
    blocked: HookBlock | None = None


class HookUnavailable(Exception):
    """The snapshot names a hook this worker does not define (or defines differently)."""


class HookRunner:
    """The hooks in scope for one activity attempt, run point by point in list order."""

    def __init__(
        self,
        functions: Mapping[str, FunctionHook],
        specs: Mapping[str, HookSpec],
        in_scope: Sequence[str],
        *,
        state: StateFactory,
        sink: EventSink,
        make_event: EventMaker,
        spans: Spans | None = None,
    ) -> None:
        self._spans = spans or Spans()
        self._functions = functions
        self._specs = specs
        self._in_scope = [i for i in dict.fromkeys(in_scope) if i in specs]
        self._state_factory = state
        self._state: object | None = None
        self._sink = sink
        self._make_event = make_event
        self._pending: list[Event] = []
        self._runs: Counter[str] = Counter()
        self._active: set[str] = set()

    def ids(self, point: HookName) -> list[str]:
        """The ids of the hooks in scope at `point`, in the order the definitions list them."""
        return [i for i in self._in_scope if self._specs[i].hook == point]

    @property
    def empty(self) -> bool:
        """Whether no hook at all is in scope (nothing can write for the thread meanwhile)."""
        return not self._in_scope

    def has(self, *points: HookName) -> bool:
        """Whether any hook in scope runs at one of `points`."""
        return any(self.ids(p) for p in points)

    async def run(
        self,
        point: HookName,
        data: Any,
        *,
        check: Check | None = None,
        about: Mapping[str, Any] | None = None,
    ) -> HookOutcome:
        """Run the point's hooks in order, each on the data the previous one left.

        `check` turns a returned value into the data to use (raising when it is unusable:
        then the run is `hook.failed` and the data is kept); `about` joins every event's
        payload (a message id, say). A nested run of a point already running (a hook
        updating a message from an update hook) runs no hooks.
        """
        hook_ids = self.ids(point)
        if not hook_ids or point in self._active:
            return HookOutcome(data)
        self._runs[point] += 1
        self._active.add(point)
        try:
            for hook_id in hook_ids:
                tag = f"hook.{point}{self._runs[point]}.{hook_id}"
                fields = {"hookId": hook_id, "hook": point, **(about or {})}
                await self._write(
                    [
                        *self.take_events(),
                        self._make_event(f"{tag}.started", "hook.started", fields),
                    ]
                )
                data, blocked = await self._one(point, hook_id, data, check, tag, fields)
                if blocked is not None:
                    return HookOutcome(data, blocked)
            return HookOutcome(data)
        finally:
            self._active.discard(point)

    def take_events(self) -> list[Event]:
        """The end events not yet written, for the activity's next commit."""
        pending, self._pending = self._pending, []
        return pending

    async def flush(self) -> None:
        """Write the end events still pending."""
        await self._write(self.take_events())

    def warn(self, suffix: str, payload: dict[str, Any]) -> None:
        """Queue a `runtime.warning` for the next commit (a repaired hook output, say)."""
        self._pending.append(self._make_event(suffix, "runtime.warning", payload))

    async def _one(
        self,
        point: HookName,
        hook_id: str,
        data: Any,
        check: Check | None,
        tag: str,
        fields: dict[str, Any],
    ) -> tuple[Any, HookBlock | None]:
        began = time.monotonic()
        attributes = {"weft.hook.id": hook_id, "weft.hook.point": point}
        with self._spans.span(f"hook {point}", attributes) as span:
            used, blocked = await self._one_in_span(
                point, hook_id, data, check, tag, fields, began, span
            )
            outcome = (
                "blocked" if blocked is not None else "replaced" if used is not data else "kept"
            )
            span.set_attribute("weft.hook.outcome", outcome)
            return used, blocked

    async def _one_in_span(
        self,
        point: HookName,
        hook_id: str,
        data: Any,
        check: Check | None,
        tag: str,
        fields: dict[str, Any],
        began: float,
        span: Span,
    ) -> tuple[Any, HookBlock | None]:
        try:
            value = await self._execute(point, hook_id, data)
            used, repairs = (
                (data, []) if value is None or point in OBSERVING_HOOKS else _checked(check, value)
            )
        except HookBlocked as refusal:
            if point not in BLOCKING_HOOKS:
                self._end(
                    tag,
                    fields,
                    began,
                    error=f"HookBlocked: only before_* hooks may refuse ({refusal.reason})",
                )
                return data, None
            self._end(tag, fields, began, outcome="blocked", reason=refusal.reason)
            return data, HookBlock(hook_id=hook_id, hook=point, reason=refusal.reason)
        except Exception as err:  # a hook's failure never fails the activity
            self._end(tag, fields, began, error=_describe(err))
            failed(span, type(err).__name__)
            return data, None
        outcome = "kept" if used is data else "replaced"
        self._end(tag, fields, began, outcome=outcome)
        if repairs:
            self.warn(
                f"{tag}.repaired",
                {
                    "code": "hook_output_repaired",
                    "message": f"hook {hook_id!r} ({point}) broke tool call/result pairs; "
                    "weft repaired them before sending: " + "; ".join(repairs),
                    "hookId": hook_id,
                    "hook": point,
                    "repairs": repairs,
                },
            )
        return used, None

    async def _execute(self, point: HookName, hook_id: str, data: Any) -> Any:
        function = self._functions.get(hook_id)
        if function is None:
            raise HookUnavailable(
                f"hook {hook_id!r} is in this thread's definitions but not on this worker"
            )
        if function.hook != point:
            raise HookUnavailable(
                f"hook {hook_id!r} hooks {function.hook} on this worker, {point} in this "
                "thread's definitions"
            )
        if self._state is None:
            self._state = await self._state_factory()
        given = copy.deepcopy(data)  # a hook that fails half-way leaves the data untouched
        async with _heartbeats():
            if function.is_async:
                return await function.execute(self._state, given)
            return await asyncio.to_thread(function.execute, self._state, given)

    def _end(
        self,
        tag: str,
        fields: dict[str, Any],
        began: float,
        *,
        error: str | None = None,
        **extra: Any,
    ) -> None:
        payload = {**fields, "durationMs": int((time.monotonic() - began) * 1000), **extra}
        if error is None:
            self._pending.append(self._make_event(f"{tag}.done", "hook.completed", payload))
        else:
            self._pending.append(
                self._make_event(f"{tag}.done", "hook.failed", {**payload, "error": error})
            )

    async def _write(self, events: list[Event]) -> None:
        if events:
            await self._sink(events)


def _checked(check: Check | None, value: Any) -> tuple[Any, list[str]]:
    if check is None:
        return value, []
    try:
        return check(value)
    except ValidationError as err:
        raise ValueError(f"returned an invalid value: {describe_validation_error(err)}") from None


def _describe(err: Exception) -> str:
    where = traceback.extract_tb(err.__traceback__)[-1:] if err.__traceback__ else []
    at = f" (at {where[0].filename}:{where[0].lineno})" if where else ""
    return f"{type(err).__name__}: {err}{at}"[:2000]


class _NoHeartbeats:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


def _heartbeats() -> Heartbeater | _NoHeartbeats:
    """A slow hook must not look like a dead worker: heartbeat while it runs."""
    return Heartbeater() if activity.in_activity() else _NoHeartbeats()
