"""`submit_turn` with `wait: "completed"`: the update waits until its turn ends.

The update is accepted into history before it waits, so a worker that dies meanwhile
loses nothing: the next worker replays it and it waits again. A message queued while a
turn runs is read by that turn's next step and ends with it (`TurnBook.join`); one still
queued when the thread is terminated, or removed from the queue, ends `aborted`. The run
does not continue as new while an update waits (workflows/continuation.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from weft.contract.messages import SubmitTurnResult
from weft.contract.thread import QueueEntry
from weft.contract.turns import TurnResult
from weft.workflows.turn_book import TurnBook


class WaitersView(Protocol):
    """What waiting for a turn reads of the thread, and the turn book it changes."""

    @property
    def turns(self) -> TurnBook: ...

    @property
    def queue(self) -> Sequence[QueueEntry]: ...

    @property
    def active_turn(self) -> str | None: ...

    @property
    def start_failure(self) -> str | None: ...

    @property
    def terminate_reason(self) -> str | None: ...

    def is_terminated(self) -> bool: ...


class TurnWaiters:
    """Holds `submit_turn` updates that wait for their turn, and answers them."""

    def __init__(self, mem: WaitersView) -> None:
        self._mem = mem

    def known(self, update_id: str) -> SubmitTurnResult | None:
        """The answer to an update id this thread already answered (re-sent after the run
        that answered it continued as new), so its message is not queued twice."""
        result = self._mem.turns.answered(update_id)
        if result is None:
            return None
        return SubmitTurnResult(
            turn_id=self._mem.turns.asked[update_id], status="queued", turn=result
        )

    def refused(self, update_id: str, rejected: SubmitTurnResult) -> SubmitTurnResult:
        """A `policy: reject` refusal, as a turn result (the turn never starts)."""
        turn = TurnResult(turn_id=rejected.turn_id, status="refused", error=rejected.reason)
        self._mem.turns.record(turn)
        self._mem.turns.ask(update_id, rejected.turn_id)
        return rejected.model_copy(update={"turn": turn})

    async def wait(
        self, update_id: str, entry: QueueEntry, accepted: SubmitTurnResult
    ) -> SubmitTurnResult:
        """Wait until the turn that reads `entry` ends; `accepted` with its result."""
        book = self._mem.turns
        book.ask(update_id, entry.turn_id)
        book.waiting[update_id] = entry.turn_id
        try:
            await workflow.wait_condition(
                lambda: (
                    outcome_of(self._mem, entry) is not None or self._mem.start_failure is not None
                )
            )
        finally:
            del book.waiting[update_id]
        if self._mem.start_failure is not None:
            # The update fails (not the run, which fails by itself): the caller learns why.
            raise ApplicationError(
                self._mem.start_failure, type="ThreadStartFailed", non_retryable=True
            )
        result = outcome_of(self._mem, entry)
        if entry.turn_id not in book.results and result is not None:
            book.record(result)  # an aborted message: remembered like a turn
        return accepted.model_copy(update={"turn": result})


def current_update_id() -> str:
    """The id of the update being handled (Temporal's, or the one the caller chose)."""
    info = workflow.current_update_info()
    return info.id if info is not None else ""


def outcome_of(mem: WaitersView, entry: QueueEntry) -> TurnResult | None:
    """How the turn of a queued entry ended; None while it is queued or running.

    Pure (it runs inside a wait condition): an `aborted` result it makes is recorded by
    the waiter.
    """
    book = mem.turns
    result = book.results.get(entry.turn_id)
    if result is not None:
        return result
    if mem.active_turn == entry.turn_id or any(
        entry.turn_id in queued for queued in book.joined.values()
    ):
        return None  # its turn runs
    queued = any(e.queue_id == entry.queue_id for e in mem.queue)
    if queued and not mem.is_terminated():
        return None
    if not queued:
        why = "the message was removed from the queue before a turn read it"
    else:
        why = "the thread was terminated before a turn read the message"
        why += f": {mem.terminate_reason}" if mem.terminate_reason else ""
    return TurnResult(turn_id=entry.turn_id, status="aborted", error=why)
