"""001's `interrupt_turn`: stop the running turn without a new message, keep the thread.

An accepted interrupt stands in `InFlight` until the turn ends: the model or tool call in
flight is cancelled, a wait on a person ends (`HumanGate`), the step calls nothing more,
and the turn loop ends the turn `interrupted` after the step (`end_turn`). A blocking
subagent call is not cancelled: the turn stops when it returns.
"""

from __future__ import annotations

from typing import Protocol

from weft.contract.messages import InterruptTurnRequest, InterruptTurnResult, Side
from weft.workflows.in_flight import InFlight, TurnStop
from weft.workflows.stop_rules import Stop
from weft.workflows.thread_stop import ThreadStop
from weft.workflows.turn_events import TurnLog, turn_completed


class InterruptView(TurnLog, Protocol):
    """What interrupting a turn reads and changes of the thread (`last_outcome` it assigns)."""

    @property
    def active_turn(self) -> str | None: ...

    @property
    def stop(self) -> ThreadStop: ...

    def count_turn(self, side: Side) -> None: ...


class TurnInterrupts:
    """Accepts interrupts of the running turn and ends the turn they stop."""

    def __init__(self, mem: InterruptView, in_flight: InFlight) -> None:
        self._mem = mem
        self._in_flight = in_flight

    def interrupt(self, request: InterruptTurnRequest) -> InterruptTurnResult:
        """Stop the running turn (`accepted`), or say why there is nothing to stop (`noop`).

        Queued messages stay queued; the next one starts its turn once this one has ended.
        """
        mem, active = self._mem, self._mem.active_turn
        if active is None or mem.is_terminated():
            why = "the thread was terminated" if mem.is_terminated() else "no turn is running"
            return InterruptTurnResult(status="noop", turn_id=request.turn_id, reason=why)
        if request.turn_id not in (None, active):
            why = f"turn {request.turn_id} is not running (the running turn is {active})"
            return InterruptTurnResult(status="noop", turn_id=request.turn_id, reason=why)
        standing = self._in_flight.turn_stop
        if standing is not None:  # asked again: the first reason stands
            return InterruptTurnResult(status="accepted", turn_id=active, reason=standing.reason)
        self._in_flight.stop_turn(TurnStop(active, request.reason))
        mem.emit(
            "thread.updated", {"interruptRequested": {"reason": request.reason}}, turn_id=active
        )
        return InterruptTurnResult(status="accepted", turn_id=active, reason=request.reason)

    def end_turn(self, side: Side, turn_id: str) -> Stop | None:
        """End the turn `interrupted` when an interrupt stands against it (None otherwise).

        It ends as `turn.completed` (stopped on request, not by a failure) with `status:
        cancelled`, 001's word for work a user interrupted; the session ends with it.
        """
        mem, stopped = self._mem, self._in_flight.turn_stop
        self._in_flight.turn_ended()
        if stopped is None or mem.is_terminated():
            return None
        mem.count_turn(side)
        mem.stop.interrupted()
        mem.last_outcome = "interrupted" + (f": {stopped.reason}" if stopped.reason else "")
        turn_completed(
            mem,
            turn_id,
            "interrupted",
            {
                "side": side,
                "stopReason": "interrupted",
                "status": "cancelled",
                "reason": stopped.reason,
                "outcome": mem.last_outcome,
            },
        )
        return Stop("session", "interrupted")
