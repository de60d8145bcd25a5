"""Ending a turn: counters, outcome, the visible response and `turn.completed`."""

from __future__ import annotations

from typing import Protocol

from weft.contract.messages import Side
from weft.workflows.stop_rules import Stop
from weft.workflows.thread_stop import ThreadStop
from weft.workflows.turn_events import TurnLog, turn_completed
from weft.workflows.views import Transcript

# Stops whose reason the step already wrote into `last_outcome` (which hook refused, which
# limit is spent and how to raise it): ending the turn must not erase it.
KEEPS_OUTCOME = frozenset({"hook_blocked", "budget_exhausted"})


class TurnEndView(TurnLog, Transcript, Protocol):
    """What ending a turn reads and changes of the thread (`last_outcome` it assigns)."""

    @property
    def stop(self) -> ThreadStop: ...

    def count_turn(self, side: Side) -> None: ...


def finish_turn(mem: TurnEndView, side: Side, turn_id: str, stop: Stop) -> None:
    """Count the turn, record its outcome, and write the lifecycle tool's response."""
    mem.count_turn(side)
    mem.stop.turn_ended(stop.reason)
    if stop.reason not in KEEPS_OUTCOME:
        mem.last_outcome = stop.response
    if stop.response is not None and stop.reason != "stop_on_response":
        # The lifecycle tool's argument becomes the visible response of the turn.
        mem.outbox_messages.append(
            mem.new_message(
                role="assistant",
                content=stop.response,
                side=side,
                turn_id=turn_id,
                attachments=list(stop.attachments),
                metadata={"status_kind": stop.reason},
            )
        )
    payload: dict[str, object] = {"side": side, "stopReason": stop.reason}
    if mem.last_outcome is not None:
        # The event log says how the turn ended too (the response, or why it stopped): a
        # read model rebuilt from events needs it (contract/rebuild.py).
        payload["outcome"] = mem.last_outcome
    turn_completed(mem, turn_id, stop.reason, payload)
