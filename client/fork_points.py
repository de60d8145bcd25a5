"""Where a thread can be forked: between turns, never inside one (docs/time-travel.md).

A point is an event sequence of the source (`--at 42`) or a turn id (`--at <turn>`: right
after that turn's last event). Inside a turn (a model call in flight, a tool call waiting
for its result) the transcript is not one a model could continue, so such a point is
refused, naming the turn ends before and after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from weft.contract.events import Event
from weft.contract.forks import ForkRefused

TURN_ENDS = ("turn.completed", "turn.failed")


@dataclass
class Turn:
    """One turn of the source, as its events tell it."""

    turn_id: str
    started: int
    ended: int | None = None


@dataclass
class Point:
    """A valid fork point: the last event the fork keeps and the turns before it."""

    sequence: int
    turn_id: str | None
    turns: list[str] = field(default_factory=list)


def turns_of(events: list[Event]) -> list[Turn]:
    """The source's turns in the order they started."""
    turns: dict[str, Turn] = {}
    for event in events:
        if event.turn_id is None or event.sequence is None:
            continue
        if event.type == "turn.started" and event.turn_id not in turns:
            turns[event.turn_id] = Turn(event.turn_id, event.sequence)
        elif event.type in TURN_ENDS and event.turn_id in turns:
            turns[event.turn_id].ended = event.sequence
    return list(turns.values())


def resolve(thread_id: str, events: list[Event], at: str | int) -> Point:
    """The point `at` names in the source's `events`; `ForkRefused` naming why not."""
    turns = turns_of(events)
    last = max((e.sequence or 0 for e in events), default=0)
    if isinstance(at, str) and not at.isdigit():
        turn = next((t for t in turns if t.turn_id == at), None)
        if turn is None:
            raise ForkRefused(f"--at: thread {thread_id!r} has no turn {at!r}")
        if turn.ended is None:
            raise ForkRefused(
                f"--at: turn {at!r} of thread {thread_id!r} has not ended; "
                f"{_nearest(turns, turn.started)}"
            )
        sequence = turn.ended
    else:
        sequence = int(at)
        if not 1 <= sequence <= last:
            raise ForkRefused(
                f"--at: thread {thread_id!r} has events 1 to {last}; there is no event {sequence}"
            )
    inside = next(
        (t for t in turns if t.started <= sequence and (t.ended is None or sequence < t.ended)),
        None,
    )
    if inside is not None:
        raise ForkRefused(
            f"--at: event {sequence} of thread {thread_id!r} is inside turn "
            f"{inside.turn_id!r} (started at event {inside.started}); "
            f"{_nearest(turns, sequence)}"
        )
    ended = [t for t in turns if t.ended is not None and t.ended <= sequence]
    return Point(
        sequence=sequence,
        turn_id=ended[-1].turn_id if ended and ended[-1].ended == sequence else None,
        turns=[t.turn_id for t in turns if t.started <= sequence],
    )


def _nearest(turns: list[Turn], sequence: int) -> str:
    """The turn ends nearest to `sequence`, before and after it, as the refusal names them."""
    ends = sorted((t.ended, t.turn_id) for t in turns if t.ended is not None)
    before = [(s, t) for s, t in ends if s < sequence]
    after = [(s, t) for s, t in ends if s >= sequence]
    parts = [
        f"before: event {before[-1][0]} (end of turn {before[-1][1]!r})"
        if before
        else "before: none (no turn has ended before it)",
        f"after: event {after[0][0]} (end of turn {after[0][1]!r})"
        if after
        else "after: none yet (the turn has not ended)",
    ]
    return "the nearest valid points are " + "; ".join(parts)
