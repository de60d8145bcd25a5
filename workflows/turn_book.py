"""What the thread remembers of its turns for callers that wait for them (`ThreadMemory.turns`).

Every turn starts with `turn.started` and ends with `turn.completed` or `turn.failed`,
whatever path ends it; `workflows/turn_events.py` writes each and tells the book the typed
fact. It keeps the results of recent turns (bounded, carried across continue-as-new
without their text), the update ids that asked for them, and which queued messages joined
a running turn. Pure: no Temporal calls, unit-tested in tests/unit/test_turn_waiters.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from weft.contract.messages import Message
from weft.contract.turns import StopReason, TurnResult, TurnsCarry, TurnStatus, UsageTotals

# Results (and asking update ids) remembered, newest last.
RECENT_TURNS = 50
T = TypeVar("T")


class TurnFacts(Protocol):
    """What the book reads of the thread when a turn ends (ThreadMemory)."""

    usage: UsageTotals
    last_outcome: str | None
    terminate_reason: str | None

    def is_terminated(self) -> bool: ...


@dataclass
class TurnBook:
    """Recent turn results, by turn id, and what the turn in progress produced so far."""

    # Recent results, the update ids that asked for them and the usage when the turn in
    # progress started: carried across continue-as-new as it is (less the responses).
    recent: TurnsCarry = field(default_factory=TurnsCarry)
    # Turn-waiting updates not answered yet (never carried: a run does not continue as new
    # while one is pending).
    waiting: dict[str, str] = field(default_factory=dict)
    # running turn id → turn ids of queued messages its steps read (they end with it).
    joined: dict[str, list[str]] = field(default_factory=dict)
    # The turn's latest assistant message in the main transcript: (id, content).
    last_reply: tuple[str, str | None] | None = None

    def started(self, facts: TurnFacts) -> None:
        """A turn started (`turn.started`): its usage counts from here."""
        self.recent.usage_at_start = facts.usage.model_copy()
        self.last_reply = None

    def completed(self, turn_id: str, event_id: str, stop: StopReason, facts: TurnFacts) -> None:
        """A turn ended by a stop (`turn.completed` with id `event_id`)."""
        self._ended(turn_id, event_id, self._completed(turn_id, stop, facts))

    def failed(
        self, turn_id: str, event_id: str, reason: StopReason | None, facts: TurnFacts
    ) -> None:
        """A turn failed or was aborted (`turn.failed` with id `event_id`)."""
        self._ended(turn_id, event_id, self._failed(turn_id, reason, facts))

    def _ended(self, turn_id: str, event_id: str, result: TurnResult) -> None:
        result.events_cursor = event_id
        self.record(result, also=self.joined.pop(turn_id, []))
        self.recent.usage_at_start = self.last_reply = None

    def join(self, queued_turn: str, turn_id: str) -> None:
        """A queued message (queued as `queued_turn`) was read by the running `turn_id`."""
        if queued_turn != turn_id:
            self.joined.setdefault(turn_id, []).append(queued_turn)

    def note_reply(self, message: Message) -> None:
        """An assistant message of the main transcript was indexed."""
        if message.role == "assistant" and message.depth == 0:
            self.last_reply = (message.id, message.content)

    def record(self, result: TurnResult, *, also: list[str] | None = None) -> None:
        """Remember how a turn ended, under its id and the ids of messages that joined it."""
        for turn_id in [result.turn_id, *(also or [])]:
            self.results.pop(turn_id, None)
            self.results[turn_id] = result
        _bound(self.results)

    def ask(self, update_id: str, turn_id: str) -> None:
        """A turn-waiting update asks for the turn its message was queued as."""
        self.asked.pop(update_id, None)
        self.asked[update_id] = turn_id
        _bound(self.asked)

    def answered(self, update_id: str) -> TurnResult | None:
        """The result an update id asked for, if it is known (a re-sent update)."""
        turn_id = self.asked.get(update_id)
        return None if turn_id is None else self.results.get(turn_id)

    def carry(self) -> TurnsCarry:
        """The book for the next run: results without their text (it is in the store)."""
        results = {k: r.model_copy(update={"response": None}) for k, r in self.results.items()}
        return self.recent.model_copy(update={"results": results}, deep=True)

    @property
    def results(self) -> dict[str, TurnResult]:
        return self.recent.results

    @property
    def asked(self) -> dict[str, str]:
        return self.recent.asked

    def _completed(self, turn_id: str, stop: StopReason, facts: TurnFacts) -> TurnResult:
        status: TurnStatus = "completed"
        if stop == "hook_blocked":
            status = "refused"
        elif stop == "interrupted":  # interrupt_turn stopped it (`outcome` says why)
            status = "cancelled"
        elif stop in ("session_fail", "budget_exhausted"):
            # A spent budget stopped the turn before its answer: `error` says which limit
            # and how to raise it.
            status = "failed"
        message_id, response = self.last_reply or (None, None)
        return TurnResult(
            turn_id=turn_id,
            status=status,
            stop_reason=stop,
            response=response if status != "refused" else None,
            message_id=message_id if status != "refused" else None,
            usage=self._usage(facts),
            error=(facts.last_outcome or stop) if status != "completed" else None,
        )

    def _failed(self, turn_id: str, stop: StopReason | None, facts: TurnFacts) -> TurnResult:
        if facts.is_terminated() or stop == "aborted_by_user":
            why = facts.terminate_reason
            return TurnResult(
                turn_id=turn_id,
                status="aborted",
                stop_reason="aborted_by_user",
                usage=self._usage(facts),
                error="the thread was terminated" + (f": {why}" if why else ""),
            )
        return TurnResult(
            turn_id=turn_id,
            status="failed",
            stop_reason=stop or "step_error",
            usage=self._usage(facts),
            error=facts.last_outcome or "the turn failed",
        )

    def _usage(self, facts: TurnFacts) -> UsageTotals | None:
        start, now = self.recent.usage_at_start, facts.usage
        if start is None:
            return None  # a turn resumed from a run that did not keep its start
        cost = None if now.cost_usd is None else now.cost_usd - (start.cost_usd or 0.0)
        return UsageTotals(
            input_tokens=now.input_tokens - start.input_tokens,
            output_tokens=now.output_tokens - start.output_tokens,
            cached_tokens=now.cached_tokens - start.cached_tokens,
            cost_usd=cost,
        )

    @classmethod
    def restore(cls, carried: TurnsCarry | None) -> TurnBook:
        """The book a continued run starts with (empty for histories before it)."""
        return cls(recent=carried.model_copy(deep=True) if carried else TurnsCarry())


def _bound(entries: dict[str, T]) -> None:
    """Keep the newest `RECENT_TURNS` entries."""
    for key in list(entries)[: max(len(entries) - RECENT_TURNS, 0)]:
        del entries[key]
