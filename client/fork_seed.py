"""What a fork starts with: the source's transcript, values, files and context boundary as
of the point, gathered into one `ForkSeed` for the store, and the memory its first run
carries (docs/time-travel.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from weft.activities.clock import now_iso
from weft.client.fork_points import Point
from weft.contract.budget import Budget
from weft.contract.context import ContextBoundary
from weft.contract.context_state import ContextState
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.forks import ForkLink
from weft.contract.messages import Message, MessageMeta
from weft.contract.thread import Counters, ThreadCarryOver
from weft.store import Store, ThreadRow
from weft.store.fork_rows import ForkSeed
from weft.store.history import files_as_of, values_as_of
from weft.store.message_history import messages_as_of
from weft.store.rows import boundary_to_row

# As many index entries as a continued run carries; older ones stay in the store.
_INDEX_CARRIED = 500
_BOUNDARY_STORED = "context.compaction.completed"


def fork_seed(
    store: Store,
    source: ThreadRow,
    events: list[Event],
    point: Point,
    snapshot: DefinitionSnapshot,
    thread: ThreadRow,
    link: ForkLink,
) -> ForkSeed:
    """The fork's rows, read from the source as of `point` (messages as they were then)."""
    kept = set(point.turns)
    transcript = messages_as_of(store.database, source.thread_id, point.sequence)
    last = max((m.position for m in transcript if m.turn_id in kept), default=-1)
    messages = [
        m.model_copy(update={"thread_id": thread.thread_id})
        for m in transcript
        if m.turn_id in kept or (m.turn_id is None and m.position <= last)
    ]
    return ForkSeed(
        thread=thread,
        messages=messages,
        values=values_as_of(store.database, source.thread_id, point.sequence),
        files=files_as_of(store.database, source.thread_id, point.sequence),
        boundaries=[
            boundary_to_row(b, ordinal)
            for ordinal, b in enumerate(_boundaries(store, source, events, point, thread))
        ],
        link=link.model_dump(by_alias=True),
        limits=Budget().stricter(snapshot.agent.budget),
        now=datetime.now(UTC),
    )


def _boundaries(
    store: Store, source: ThreadRow, events: list[Event], point: Point, thread: ThreadRow
) -> list[ContextBoundary]:
    """The source's compaction boundaries stored by the point, under the fork's id."""
    stored = {
        str(e.payload.get("boundaryId"))
        for e in events
        if e.type == _BOUNDARY_STORED and e.sequence is not None and e.sequence <= point.sequence
    }
    return [
        b.model_copy(update={"thread_id": thread.thread_id})
        for b in store.boundaries.list(source.thread_id)
        if b.boundary_id in stored
    ]


def carry_over(
    seed: ForkSeed, session_id: str, snapshot: DefinitionSnapshot, point: Point, link: ForkLink
) -> ThreadCarryOver:
    """The memory the fork's first run starts with: the copied transcript indexed, the
    boundary in force at the point, and the facts that announce the fork, written by the
    run as a continued run writes its own."""
    thread_id = seed.thread.thread_id
    index = [
        MessageMeta(
            id=m.id,
            position=m.position,
            role=m.role,
            side=m.side,
            turn_id=m.turn_id,
            tool_call_id=m.tool_call_id,
            created_at=m.created_at,
            parent_id=m.parent_id,
            depth=m.depth,
        )
        for m in seed.messages
    ]
    kept = index[-_INDEX_CARRIED:]
    now = now_iso()
    announce = [
        Event(
            type="session.created",
            event_id=f"{thread_id}:session.created",
            timestamp=now,
            thread_id=thread_id,
            session_id=session_id,
            payload={"agent": snapshot.agent.name, "rootThreadId": thread_id},
        ),
        Event(
            type="thread.updated",
            event_id=f"{thread_id}:forked",
            timestamp=now,
            thread_id=thread_id,
            session_id=session_id,
            payload={"forkedFrom": link.model_dump(mode="json", by_alias=True)},
        ),
    ]
    boundaries = [ContextBoundary.model_validate(row["data"]) for row in seed.boundaries]
    return ThreadCarryOver(
        snapshot=snapshot,
        status="waiting_input",
        index=kept,
        index_base=len(index) - len(kept),
        counters=Counters(
            messages=_next_position(seed.messages),
            turns=len(point.turns),
        ),
        context=ContextState(boundary=boundaries[-1], compactions=len(boundaries))
        if boundaries
        else None,
        outbox=announce,
    )


def _next_position(messages: list[Message]) -> int:
    return max((m.position for m in messages), default=-1) + 1
