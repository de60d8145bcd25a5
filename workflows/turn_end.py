"""Ending a turn: counters, outcome, the visible response and `turn.completed`."""

from __future__ import annotations

from weft.contract.messages import Side
from weft.workflows.stop_rules import Stop
from weft.workflows.thread_state import ThreadMemory


def finish_turn(mem: ThreadMemory, side: Side, turn_id: str, stop: Stop) -> None:
    """Count the turn, record its outcome, and write the lifecycle tool's response."""
    mem.count_turn(side)
    mem.stop_reason = stop.reason
    if stop.reason != "hook_blocked":  # keep the refusal the step recorded
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
    mem.emit("turn.completed", {"side": side, "stopReason": stop.reason}, turn_id=turn_id)
