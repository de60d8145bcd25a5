"""Scheduled effects: durable timers in the thread's workflow (Runtime §2, fourth trigger).

Each pending effect is one Temporal timer (named in the UI by its summary); removing the
effect cancels its timer. A fired timer only marks the effect due: it runs as the
`effect.run` activity at the next safe point, when the thread is idle or between two
steps, because one thread never runs two flows (Runtime §11). What the effect queues
(`queue_message`, `queue_tool`) then starts or joins an execution, as §2 says. Pending
effects, with their due times, are carried across continue-as-new; the next run starts
their timers for the time that is left.

The lifecycle is recorded with the Agent Runtime `job.*` events (created, started,
completed, failed, cancelled), each carrying the effect, from which the store keeps the
rows ThreadState reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.activities import Intent
from weft.contract.carry_parts import EffectBook
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.effects import (
    ACTIVITY_EFFECT_RUN,
    JOB_KIND,
    SIGNAL_REMOVE_EFFECT,
    SIGNAL_SCHEDULE_EFFECT,
    UPDATE_REMOVE_EFFECT_CHECKED,
    UPDATE_SCHEDULE_EFFECT_CHECKED,
    EffectRunInput,
    EffectRunResult,
    RemoveEffectRequest,
    RemoveEffectResult,
    ScheduledEffect,
    ScheduleEffectRequest,
    ScheduleEffectResult,
)
from weft.workflows import ui_summaries
from weft.workflows.activity_calls import Carried, Limits, start_within_budget
from weft.workflows.control import parse_single, parse_update
from weft.workflows.control_plane import ControlPlane, refused_after_terminate
from weft.workflows.in_flight import InFlight
from weft.workflows.outbox import Outbox
from weft.workflows.views import Identity, Pending, Starts, Terminated

# An effect that raises is run this many times before its failure is recorded.
EFFECT_ATTEMPTS = 3


class EffectHost(Protocol):
    """What the effect timers need from the thread."""

    def apply_intents(self, intents: list[Intent]) -> None: ...


class UnknownEffect(Exception):
    """A schedule request names an effect the thread's definitions do not have."""


class EffectsView(Terminated, Identity, Pending, Starts, Protocol):
    """What the effect timers read of the thread, and the effect book they change."""

    @property
    def effects(self) -> EffectBook: ...

    @property
    def snapshot(self) -> DefinitionSnapshot | None: ...

    @property
    def active_agent(self) -> str | None: ...


class EffectTimers:
    """Schedules, removes and runs the thread's effects."""

    def __init__(
        self, mem: EffectsView, in_flight: InFlight, host: EffectHost, outbox: Outbox
    ) -> None:
        self._mem = mem
        self._outbox = outbox
        self._in_flight = in_flight
        self._host = host
        self._timers: dict[str, asyncio.Task[None]] = {}
        # Set when effects change outside a step (a signal, an update): an idle thread
        # wakes to write the events.
        self.changed = False

    @property
    def book(self) -> EffectBook:
        return self._mem.effects

    # ---- scheduling and removing ------------------------------------------------------

    def schedule(self, request: ScheduleEffectRequest, *, by: str) -> ScheduleEffectResult:
        """Start a timer for the effect (a known id changes nothing: it `exists`)."""
        mem, book = self._mem, self.book
        self._check_name(request.name)
        effect_id = request.id or mem.new_id("eff")
        known = book.pending.get(effect_id)
        if known is not None:
            return ScheduleEffectResult(
                id=effect_id, status="exists", scheduled_at=known.scheduled_at
            )
        now = mem.now()
        effect = ScheduledEffect(
            id=effect_id,
            name=request.name,
            args=request.args,
            scheduled_at=_iso(now + timedelta(milliseconds=request.delay_ms)),
            created_at=_iso(now),
            scheduled_by=by,
        )
        book.pending[effect_id] = effect
        self._emit("job.created", effect, status="pending", delayMs=request.delay_ms)
        self.changed = True
        self._arm(effect, now)
        return ScheduleEffectResult(
            id=effect_id, status="scheduled", scheduled_at=effect.scheduled_at
        )

    def remove(self, effect_id: str, *, reason: str) -> bool:
        """Cancel a pending effect and its timer; False when it is not pending."""
        effect = self.book.pending.pop(effect_id, None)
        if effect is None:
            return False
        if effect_id in self.book.due:
            self.book.due.remove(effect_id)
        timer = self._timers.pop(effect_id, None)
        if timer is not None:
            timer.cancel()  # Temporal cancels the timer
        self._emit("job.cancelled", effect, status="cancelled", reason=reason)
        self.changed = True
        return True

    def cancel_all(self, reason: str) -> None:
        """The thread terminated: no effect of it will run."""
        for effect_id in list(self.book.pending):
            self.remove(effect_id, reason=reason)

    def restart_timers(self) -> None:
        """A continued run: start the carried effects' timers for the time left."""
        now = self._mem.now()
        for effect in self.book.listed():
            if effect.id not in self.book.due:
                self._arm(effect, now)

    def _arm(self, effect: ScheduledEffect, now: datetime) -> None:
        seconds = (_parse(effect.scheduled_at) - now).total_seconds()
        if seconds <= 0:
            self.book.due.append(effect.id)
            return
        self._timers[effect.id] = asyncio.create_task(self._alarm(effect, seconds))

    async def _alarm(self, effect: ScheduledEffect, seconds: float) -> None:
        await workflow.sleep(seconds, summary=f"effect {effect.name} ({effect.id})")
        self._timers.pop(effect.id, None)
        if effect.id in self.book.pending and effect.id not in self.book.due:
            self.book.due.append(effect.id)

    def _check_name(self, name: str) -> None:
        snapshot = self._mem.snapshot
        if snapshot is None:
            return  # still preparing: effect.run checks the name when it fires
        if name not in snapshot.effects:
            known = ", ".join(sorted(snapshot.effects)) or "(none defined)"
            raise UnknownEffect(f"unknown effect {name!r}; this thread's effects: {known}")

    # ---- running ----------------------------------------------------------------------

    def has_due(self) -> bool:
        return bool(self.book.due) and not self._mem.is_terminated()

    async def run_due(self) -> None:
        """Run every due effect, in the order their timers fired; apply what they ask."""
        mem, book = self._mem, self.book
        while book.due and not mem.is_terminated():
            effect = book.pending.pop(book.due.pop(0), None)
            if effect is not None:
                await self._run(effect)

    async def _run(self, effect: ScheduledEffect) -> None:
        mem = self._mem
        assert mem.snapshot is not None
        fired_at = mem.now()
        late_ms = round((fired_at - _parse(effect.scheduled_at)).total_seconds() * 1000)
        self._emit("job.started", effect, status="running", firedAt=_iso(fired_at), lateMs=late_ms)
        options = mem.start.options
        job = EffectRunInput(
            thread_id=mem.thread_id,
            session_id=mem.session_id,
            snapshot_id=mem.snapshot.snapshot_id,
            agent=mem.active_agent,
            effect=effect,
            fired_at=_iso(fired_at),
            max_attempts=EFFECT_ATTEMPTS,
            outbox=mem.take_outbox(),
        )
        handle, carried = await start_within_budget(
            mem,
            self._outbox,
            ACTIVITY_EFFECT_RUN,
            job,
            Carried(events=job.outbox),
            without_carried={"outbox": []},
            result_type=EffectRunResult,
            # Two attempts beyond the effect's own: a worker lost mid-run is retried too.
            limits=Limits(
                options.tool_timeout_seconds,
                options.heartbeat_timeout_seconds,
                EFFECT_ATTEMPTS + 2,
            ),
            summary=ui_summaries.effect_run(effect.name, effect.id),
        )
        self._in_flight.track(handle)
        try:
            result = await handle
        except ActivityError as err:
            carried.give_back(mem)
            if mem.is_terminated():  # terminate cancelled the run: none of its writes landed
                self._emit("job.cancelled", effect, status="cancelled", reason="thread terminated")
                return
            text = str(err.cause or err)
            incident = mem.incident("effect_failed", f"effect {effect.name} ({effect.id}): {text}")
            self._emit(
                "job.failed",
                effect,
                status="failed",
                error=text,
                code="effect_run_failed",
                incident=incident,
            )
            return
        finally:
            self._in_flight.track(None)
        if result.status == "failed":
            mem.incident("effect_failed", f"effect {effect.name} ({effect.id}): {result.error}")
        self._host.apply_intents(result.intents)

    # ---- signals, updates and intents -------------------------------------------------

    def on_schedule_signal(self, name: str, values: list[Any]) -> None:
        self._schedule_or_warn(parse_single(name, values, ScheduleEffectRequest), name, "signal")

    def on_remove_signal(self, name: str, values: list[Any]) -> None:
        request = parse_single(name, values, RemoveEffectRequest)
        if not self.remove(request.id, reason="removed by a signal"):
            self._mem.warn("unknown_effect", name, f"no pending effect {request.id!r}")

    def validate_schedule(self, payload: Any) -> None:
        """The update validator: refuse before anything reaches history."""
        if self._mem.is_terminated():
            raise ApplicationError(
                f"thread {self._mem.thread_id} was terminated; it schedules no effects",
                type="ThreadTerminated",
            )
        request = parse_update(UPDATE_SCHEDULE_EFFECT_CHECKED, payload, ScheduleEffectRequest)
        try:
            self._check_name(request.name)
        except UnknownEffect as err:
            raise ApplicationError(str(err), type="UnknownEffect") from None

    def schedule_checked(self, payload: Any = None) -> ScheduleEffectResult:
        """The update: schedule (already validated)."""
        return self.schedule(ScheduleEffectRequest.model_validate(payload), by="update")

    def validate_remove(self, payload: Any) -> None:
        parse_update(UPDATE_REMOVE_EFFECT_CHECKED, payload, RemoveEffectRequest)

    def remove_checked(self, payload: Any = None) -> RemoveEffectResult:
        """The update: remove; `removed` is False when no such effect is pending."""
        request = RemoveEffectRequest.model_validate(payload)
        return RemoveEffectResult(
            id=request.id, removed=self.remove(request.id, reason="removed by an update")
        )

    def register(self, control: ControlPlane, *, refuse_if_not_started: Callable[[], None]) -> None:
        """Take the effect signals and intents from the control plane, and set the two
        checked updates (their validators run `refuse_if_not_started` first)."""
        control.handle_signals(
            {
                SIGNAL_SCHEDULE_EFFECT: self.on_schedule_signal,
                SIGNAL_REMOVE_EFFECT: self.on_remove_signal,
            }
        )
        control.handle_intents(
            {"schedule_effect": self._schedule_intent, "remove_effect": self._remove_intent}
        )

        def validate_schedule(payload: Any = None) -> None:
            refuse_if_not_started()
            self.validate_schedule(payload)

        def validate_remove(payload: Any = None) -> None:
            refuse_if_not_started()
            self.validate_remove(payload)

        workflow.set_update_handler(
            UPDATE_SCHEDULE_EFFECT_CHECKED, self.schedule_checked, validator=validate_schedule
        )
        workflow.set_update_handler(
            UPDATE_REMOVE_EFFECT_CHECKED, self.remove_checked, validator=validate_remove
        )

    def _schedule_intent(self, intent: Intent) -> None:
        request = parse_single("scheduleEffect", [intent.data], ScheduleEffectRequest)
        self._schedule_or_warn(request, "schedule_effect intent", "thread state")

    def _schedule_or_warn(self, request: ScheduleEffectRequest, source: str, by: str) -> None:
        """Schedule what a signal or an intent asks; what cannot be becomes a warning."""
        if refused_after_terminate(self._mem, source):
            return
        try:
            self.schedule(request, by=by)
        except UnknownEffect as err:
            self._mem.warn("unknown_effect", source, str(err))

    def _remove_intent(self, intent: Intent) -> None:
        request = parse_single("removeScheduledEffect", [intent.data], RemoveEffectRequest)
        self.remove(request.id, reason="removed by the thread")

    def _emit(self, event_type: str, effect: ScheduledEffect, *, status: str, **data: Any) -> None:
        payload = {
            "kind": JOB_KIND,
            "effect": effect.model_dump(mode="json", by_alias=True),
            **data,
        }
        self._mem.emit(event_type, payload, status=status)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))
