"""What the thread remembers of its turns for callers that wait for them (`ThreadMemory.turns`).

Every turn starts with `turn.started` and ends with `turn.completed` or `turn.failed`,
whatever path ends it, so the book learns from those events as `ThreadMemory.emit` makes
them. It keeps the results of recent turns (bounded, carried across continue-as-new
without their text), the update ids that asked for them, and which queued messages joined
a running turn. Pure: no Temporal calls, unit-tested in tests/unit/test_turn_waiters.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, TypeVar, cast, get_args

from weft.contract.events import Event
from weft.contract.messages import Message
from weft.contract.turns import StopReason, TurnResult, TurnsCarry, TurnStatus, UsageTotals

# Results (and asking update ids) remembered, newest last.
RECENT_TURNS = 50
T = TypeVar("T")
TURN_EVENTS = frozenset({"turn.started", "turn.completed", "turn.failed"})


class TurnFacts(Protocol):
    """What the book reads of the thread when a turn ends (ThreadMemory)."""

    usage: UsageTotals
    last_outcome: str | None
    terminate_reason: str | None

    def is_terminated(self) -> bool: ...


@dataclass
class TurnBook:
    """Recent turn results, by turn id, and what the turn in progress produced so far."""

    results: dict[str, TurnResult] = field(default_factory=dict)
    # update id of a turn-waiting submit_turn → the turn id its message was queued with.
    asked: dict[str, str] = field(default_factory=dict)
    # Turn-waiting updates not answered yet (never carried: a run does not continue as new
    # while one is pending).
    waiting: dict[str, str] = field(default_factory=dict)
    # running turn id → turn ids of queued messages its steps read (they end with it).
    joined: dict[str, list[str]] = field(default_factory=dict)
    usage_at_start: UsageTotals | None = None
    # The turn's latest assistant message in the main transcript: (id, content).
    last_reply: tuple[str, str | None] | None = None

    def observe(self, event: Event, facts: TurnFacts) -> None:
        """Learn from an event the thread emitted (only turn events matter)."""
        if event.type not in TURN_EVENTS or event.turn_id is None:
            return
        if event.type == "turn.started":
            self.usage_at_start = facts.usage.model_copy()
            self.last_reply = None
            return
        payload = event.payload if isinstance(event.payload, dict) else {}
        if event.type == "turn.completed":
            outcome = payload.get("outcome")
            result = self._completed(
                event.turn_id,
                payload.get("stopReason"),
                facts,
                outcome if isinstance(outcome, str) else None,
            )
        else:
            result = self._failed(event.turn_id, payload.get("reason"), facts)
        result.events_cursor = event.event_id
        self.record(result, also=self.joined.pop(event.turn_id, []))
        self.usage_at_start = self.last_reply = None

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
        return TurnsCarry(
            results={k: r.model_copy(update={"response": None}) for k, r in self.results.items()},
            asked=dict(self.asked),
            usage_at_start=self.usage_at_start,
        )

    def _completed(
        self, turn_id: str, reason: object, facts: TurnFacts, outcome: str | None
    ) -> TurnResult:
        stop = _stop_reason(reason)
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
            error=(outcome or facts.last_outcome or stop) if status != "completed" else None,
        )

    def _failed(self, turn_id: str, reason: object, facts: TurnFacts) -> TurnResult:
        stop = _stop_reason(reason)
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
        start, now = self.usage_at_start, facts.usage
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
        if carried is None:
            return cls()
        return cls(
            results=dict(carried.results),
            asked=dict(carried.asked),
            usage_at_start=carried.usage_at_start,
        )


def _stop_reason(value: object) -> StopReason | None:
    return cast(StopReason, value) if value in get_args(StopReason) else None


def _bound(entries: dict[str, T]) -> None:
    """Keep the newest `RECENT_TURNS` entries."""
    for key in list(entries)[: max(len(entries) - RECENT_TURNS, 0)]:
        del entries[key]
