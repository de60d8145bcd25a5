"""The thread's FIFO queue of messages and tools, and its edits: enqueue, remove, promote,
reject and interrupt.

Each change records `queue.changed` with the queue as it is afterwards, so a client can
rebuild the queue from events alone.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from weft.contract.messages import QueuedMessage, QueuedTool, SubmitTurnResult
from weft.contract.thread import QueueEntry, ThreadStatus
from weft.workflows.views import Facts


class UnknownQueuedTurn(Exception):
    """A remove or promote named a queue id that is not queued."""


class QueueView(Facts, Protocol):
    """What the queue reads of the thread, and its entries (carried as they are)."""

    @property
    def queue(self) -> deque[QueueEntry]: ...

    @property
    def status(self) -> ThreadStatus: ...

    @property
    def active_turn(self) -> str | None: ...

    @property
    def truthful_log(self) -> bool: ...

    def is_idle(self) -> bool: ...


class ThreadQueue:
    """Queued work of one thread; the entries live in `QueueView.queue` (carried)."""

    def __init__(self, mem: QueueView) -> None:
        self._mem = mem
        # Queue ids of this run's messages measured against the payload budget on arrival
        # (a signal's, an intent's): the drain need not encode them again. Not carried: a
        # continued run measures what it was handed.
        self._measured: set[str] = set()

    def __bool__(self) -> bool:
        return bool(self._mem.queue)

    def __len__(self) -> int:
        return len(self._mem.queue)

    def add_message(
        self,
        message: QueuedMessage,
        *,
        source: str = "runtime",
        policy: str = "enqueue",
        measured: bool = False,
    ) -> QueueEntry:
        """Queue a message as a turn of its own; `turn.submitted` says so.

        `source` is what sent it (`submit_turn`, `queue_message`, a tool's intent, or the
        runtime: a subagent's report); `policy` the submit policy it came with; `measured`
        that it was found within the payload budget on arrival.
        """
        mem = self._mem
        entry = self._entry(message=message)
        if measured:
            self._measured.add(entry.queue_id)
        starts_now = mem.is_idle() and not mem.queue
        self._append(entry)
        if mem.truthful_log:  # new in runs that asked the patch: old histories replay as was
            mem.emit(
                "turn.submitted",
                {
                    # `accepted`: it starts a turn now; `queued`: it waits for, or joins,
                    # the running turn (read at its next step).
                    "status": "accepted" if starts_now else "queued",
                    "policy": policy,
                    "source": source,
                    "role": message.role,
                },
                turn_id=entry.turn_id,
                queue_id=entry.queue_id,
            )
        return entry

    def add_tool(self, tool: QueuedTool) -> QueueEntry:
        """Queue a tool call to run through the normal tool flow."""
        entry = self._entry(tool=tool)
        self._append(entry)
        return entry

    def pop(self) -> QueueEntry:
        """The oldest entry, removed (no event: the drain records one for all it took)."""
        return self.take()[0]

    def take(self) -> tuple[QueueEntry, bool]:
        """The oldest entry, removed as `pop` does, and whether it was measured against the
        payload budget on arrival."""
        entry = self._mem.queue.popleft()
        measured = entry.queue_id in self._measured
        self._measured.discard(entry.queue_id)
        return entry, measured

    def head(self) -> QueueEntry:
        return self._mem.queue[0]

    def remove(self, queue_id: str) -> None:
        """Drop a queued turn; `UnknownQueuedTurn` when there is no such entry."""
        entry = self._find(queue_id)
        self._mem.queue.remove(entry)
        self._changed("removed", entry)

    def promote(self, queue_id: str) -> None:
        """Move a queued turn to the front of the queue."""
        entry = self._find(queue_id)
        self._mem.queue.remove(entry)
        self._mem.queue.appendleft(entry)
        self._changed("promoted", entry)

    def reject(self) -> SubmitTurnResult:
        """Refuse a `submit_turn` with policy `reject` because the thread is busy."""
        mem = self._mem
        reason = (
            f"policy 'reject': the thread is busy ({mem.status}"
            + (f", turn {mem.active_turn}" if mem.active_turn else "")
            + (f", {len(mem.queue)} queued" if mem.queue else "")
            + ")"
        )
        turn_id = mem.new_id("turn")
        mem.emit(
            "queue.changed",
            {"action": "rejected", "reason": reason, "queue": self.snapshot()},
            turn_id=turn_id,
        )
        return SubmitTurnResult(turn_id=turn_id, status="rejected", reason=reason)

    def interrupted(self, entry: QueueEntry) -> None:
        """Record that `entry` cancelled the in-flight model call of the active turn."""
        self._changed("interrupt", entry, interruptedTurnId=self._mem.active_turn)

    def drained(self, *, turn_id: str, step_id: str) -> None:
        """Record that a step took every queued entry."""
        self._mem.emit(
            "queue.changed",
            {"action": "drained", "queue": self.snapshot()},
            turn_id=turn_id,
            step_id=step_id,
        )

    def snapshot(self) -> list[dict[str, Any]]:
        """The queue as `queue.changed` events describe it."""
        return [entry.to_item().model_dump(by_alias=True) for entry in self._mem.queue]

    def _entry(
        self, *, message: QueuedMessage | None = None, tool: QueuedTool | None = None
    ) -> QueueEntry:
        mem = self._mem
        queue_id, turn_id = mem.new_id("q"), mem.new_id("turn")  # in this order: replay
        return QueueEntry(
            queue_id=queue_id,
            turn_id=turn_id,
            enqueued_at=mem.timestamp(),
            message=message,
            tool=tool,
        )

    def _append(self, entry: QueueEntry) -> None:
        self._mem.queue.append(entry)
        self._changed("enqueued", entry)

    def _changed(self, action: str, entry: QueueEntry, **extra: object) -> None:
        self._mem.emit(
            "queue.changed",
            {"action": action, "queueId": entry.queue_id, "queue": self.snapshot(), **extra},
            queue_id=entry.queue_id,
        )

    def _find(self, queue_id: str) -> QueueEntry:
        entry = next((e for e in self._mem.queue if e.queue_id == queue_id), None)
        if entry is None:
            queued = ", ".join(e.queue_id for e in self._mem.queue) or "none"
            raise UnknownQueuedTurn(f"no queued turn {queue_id!r}; queued: {queued}")
        return entry
