"""Runtime §3 step 1: drain the thread's queue into the step's new messages.

Queued tools run at once through the normal tool flow; a queued message too large to
schedule is refused. Signals and tools' intents are measured on arrival (and refused
there), so only the others are measured here: the start input's messages, a subagent's
report, `submit_turn`'s message, a continued run's queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from weft.contract.messages import Message, QueuedMessage, Side
from weft.contract.thread import ThreadStartInput
from weft.workflows.payload_size import encoded_size, megabytes
from weft.workflows.queue import ThreadQueue
from weft.workflows.stop_rules import Stop
from weft.workflows.thread_stop import ThreadStop
from weft.workflows.tool_runner import ToolRunner
from weft.workflows.turn_book import TurnBook
from weft.workflows.views import Facts, Transcript


@dataclass
class Drained:
    """What a drain took: new messages for the model, and refusals of oversized ones."""

    messages: list[Message] = field(default_factory=list)
    oversized: list[str] = field(default_factory=list)


class IntakeView(Facts, Transcript, Protocol):
    """What draining the queue reads and changes of the thread (`last_outcome` it assigns)."""

    last_outcome: str | None

    @property
    def start(self) -> ThreadStartInput: ...

    @property
    def turns(self) -> TurnBook: ...

    @property
    def stop(self) -> ThreadStop: ...


class Intake:
    """Takes every queued entry, FIFO, at the start of a step (or a restarted step)."""

    def __init__(self, mem: IntakeView, queue: ThreadQueue, tools: ToolRunner) -> None:
        self._mem = mem
        self._queue = queue
        self._tools = tools

    async def drain(self, side: Side, turn_id: str, step_id: str) -> Drained:
        mem, queue = self._mem, self._queue
        drained = Drained()
        if not queue:
            return drained
        budget = mem.start.options.payload_budget_bytes
        while queue:
            entry, measured = queue.take()
            mem.turns.join(entry.turn_id, turn_id)
            message = entry.message
            if message is not None and not measured and encoded_size(message) > budget:
                drained.oversized.append(_too_large(entry.queue_id, entry.turn_id, message, budget))
            elif message is not None:
                # A queued assistant message speaks for side A (and so wakes side B); user
                # and system messages belong to no side, and every side sees them as such.
                drained.messages.append(
                    mem.new_message(
                        role=message.role,
                        content=message.content,
                        side="a" if message.role == "assistant" else None,
                        turn_id=turn_id,
                        attachments=message.attachments,
                        silent=message.silent,
                        metadata=message.metadata,
                    )
                )
            elif entry.tool is not None:
                await self._tools.run_queued(
                    entry.tool, prior=drained.messages, side=side, turn_id=turn_id, step_id=step_id
                )
                drained.messages = []
        queue.drained(turn_id=turn_id, step_id=step_id)
        return drained

    def refuse(self, drained: Drained, *, turn_id: str, step_id: str) -> Stop:
        """End the turn with step_error naming the queued messages too big to schedule."""
        mem = self._mem
        mem.outbox_messages.extend(drained.messages)  # the others are kept, in order
        text = "; ".join(drained.oversized)
        mem.stop.step_failed()
        mem.last_outcome = text
        incident = mem.incident("payload_too_large", text, turn_id=turn_id, step_id=step_id)
        mem.emit(
            "runtime.warning",
            {"code": "payload_too_large", "message": text, "incident": incident},
            turn_id=turn_id,
            step_id=step_id,
        )
        return Stop("session", "step_error")


def _too_large(queue_id: str, turn_id: str, message: QueuedMessage, budget: int) -> str:
    return (
        f"queued message {queue_id} (turn {turn_id}, role {message.role}) is "
        f"{megabytes(encoded_size(message))} encoded, over the thread's payload budget of "
        f"{megabytes(budget)}; it was not sent to the model (upload large content as an "
        "attachment)"
    )
