"""Forks and rewinds: a new thread whose transcript, key-value data and files are the
source's as of a point between turns (docs/time-travel.md).

A fork reads only the store and the source's Temporal history, so forking a running thread
does not disturb it. The fork starts as a run that carries its memory (`ThreadCarryOver`,
as a continued run does): its message index and counters know the copied transcript, and
its definitions snapshot is given, so the workflow runs no new commands for it. A rewind
is a fork that takes over: the source records its successor and is terminated.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes

from weft.activities.clock import now_iso
from weft.client.fork_definitions import fork_snapshot, source_start
from weft.client.fork_points import Point, resolve
from weft.client.threads import new_thread_id
from weft.contract.budget import Budget
from weft.contract.correlation import default_session_id
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.events import Event
from weft.contract.forks import ForkLink, ForkRefused, ForkResult
from weft.contract.messages import Message, MessageMeta
from weft.contract.thread import (
    SIGNAL_TERMINATE,
    WORKFLOW_TYPE,
    Counters,
    ThreadCarryOver,
    ThreadStartInput,
)
from weft.definitions import Definitions
from weft.store import Store, ThreadRow
from weft.store.history import ThreadLinks, files_as_of, seed_state, values_as_of
from weft.workflows import search_attributes as attributes

# As many index entries as a continued run carries; older ones stay in the store.
_INDEX_CARRIED = 500

__all__ = ["ForkLink", "ForkRefused", "ForkResult", "Forks"]


class Forks:
    """Fork and rewind threads through a Temporal client and the store they share."""

    def __init__(self, client: Client, store: Store, *, task_queue: str = "agents") -> None:
        self._client = client
        self._store = store
        self._task_queue = task_queue
        self._links = ThreadLinks(store.database)

    async def fork(
        self,
        thread_id: str,
        *,
        at: str | int,
        agent: str | None = None,
        model: str | None = None,
        prompt: str | None = None,
        definitions: Definitions | str | Path | None = None,
        fork_id: str | None = None,
        rewind: bool = False,
    ) -> ForkResult:
        """Start a thread from `thread_id` as of `at` (a turn id: after it ended; or an
        event sequence); `ForkRefused` names the nearest valid points when `at` is inside
        a turn. The fork runs on the source's definitions unless some are given."""
        source = await asyncio.to_thread(self._store.threads.get, thread_id)
        if source is None:
            raise ForkRefused(f"no thread {thread_id!r} in the store")
        events = await asyncio.to_thread(self._all_events, thread_id)
        point = resolve(thread_id, events, at)
        start, base = await source_start(self._client, thread_id)
        snapshot = fork_snapshot(
            base, agent=agent, model=model, prompt=prompt, definitions=definitions
        )
        new_id = fork_id or new_thread_id(snapshot.agent.name)
        link = ForkLink(
            thread_id=thread_id, at_sequence=point.sequence, at_turn_id=point.turn_id, rewind=rewind
        )
        session_id = default_session_id(new_id)
        messages = await asyncio.to_thread(
            self._seed, source, new_id, session_id, point, snapshot, link
        )
        carry = _carry_over(new_id, session_id, snapshot, messages, point, link)
        fork_start = ThreadStartInput(
            agent=snapshot.agent.name,
            session_id=session_id,
            user_id=source.user_id,
            env=start.env,
            options=start.options,
            carry_over=carry,
        )
        await self._client.start_workflow(
            WORKFLOW_TYPE,
            fork_start,
            id=new_id,
            task_queue=self._task_queue,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(attributes.AGENT, snapshot.agent.name),
                    SearchAttributePair(attributes.STATUS, "waiting_input"),
                    SearchAttributePair(attributes.SESSION, session_id),
                    SearchAttributePair(attributes.FORKED_FROM, thread_id),
                ]
            ),
            static_summary=f"{snapshot.agent.name}: fork of {thread_id} at event {point.sequence}",
        )
        return ForkResult(thread_id=new_id, forked_from=link, messages=len(messages))

    async def rewind(
        self,
        thread_id: str,
        *,
        at: str | int,
        reason: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        prompt: str | None = None,
        definitions: Definitions | str | Path | None = None,
        fork_id: str | None = None,
    ) -> ForkResult:
        """Fork `thread_id` at `at` and let the fork take over: the source records its
        successor (`history.rollback.completed`, its link) and is terminated. A closed
        thread, or a point the fork refuses, is refused before anything is written."""
        description = await self._client.get_workflow_handle(thread_id).describe()
        if description.status != WorkflowExecutionStatus.RUNNING:
            raise ForkRefused(f"thread {thread_id!r} has closed: fork it instead of rewinding")
        resolve(thread_id, await asyncio.to_thread(self._all_events, thread_id), at)
        await asyncio.to_thread(
            self._rollback_event, thread_id, "history.rollback.started", {"at": str(at)}
        )
        result = await self.fork(
            thread_id,
            at=at,
            agent=agent,
            model=model,
            prompt=prompt,
            definitions=definitions,
            fork_id=fork_id,
            rewind=True,
        )
        successor = result.thread_id
        await asyncio.to_thread(self._links.set_successor, thread_id, successor)
        await asyncio.to_thread(
            self._rollback_event,
            thread_id,
            "history.rollback.completed",
            {
                "successorThreadId": successor,
                "atSequence": result.forked_from.at_sequence,
                "atTurnId": result.forked_from.at_turn_id,
            },
        )
        text = f"rewound: continued by thread {successor}" + (f" ({reason})" if reason else "")
        await self._client.get_workflow_handle(thread_id).signal(SIGNAL_TERMINATE, {"reason": text})
        return result

    async def successor(self, thread_id: str) -> str | None:
        """The thread that took over from a rewound `thread_id`, or None."""
        return (await asyncio.to_thread(self._links.get, thread_id))[1]

    async def forked_from(self, thread_id: str) -> ForkLink | None:
        """Where a fork came from, or None for a thread that is not one."""
        link = (await asyncio.to_thread(self._links.get, thread_id))[0]
        return None if link is None else ForkLink.model_validate(link)

    # ---- the store ---------------------------------------------------------------------

    def _all_events(self, thread_id: str) -> list[Event]:
        events: list[Event] = []
        after = 0
        while batch := self._store.events.read(thread_id, after=after, limit=1000):
            events.extend(batch)
            after = batch[-1].sequence or after + len(batch)
        return events

    def _seed(
        self,
        source: ThreadRow,
        new_id: str,
        session_id: str,
        point: Point,
        snapshot: DefinitionSnapshot,
        link: ForkLink,
    ) -> list[Message]:
        """Write the fork's snapshot, transcript, values, files, row and link."""
        store = self._store
        kept = set(point.turns)
        transcript = store.messages.list(source.thread_id)
        last = max((m.position for m in transcript if m.turn_id in kept), default=-1)
        messages = [
            m.model_copy(update={"thread_id": new_id})
            for m in transcript
            if m.turn_id in kept or (m.turn_id is None and m.position <= last)
        ]
        store.snapshots.put(snapshot.snapshot_id, snapshot.model_dump(mode="json", by_alias=True))
        store.messages.append(messages)
        seed_state(
            store.database,
            new_id,
            values_as_of(store.database, source.thread_id, point.sequence),
            files_as_of(store.database, source.thread_id, point.sequence),
        )
        now = datetime.now(UTC)
        store.threads.upsert(
            ThreadRow(
                thread_id=new_id,
                agent=snapshot.agent.name,
                status="waiting_input",
                session_id=session_id,
                user_id=source.user_id,
                created_at=now,
                env=source.env,
            )
        )
        with store.database.write() as connection:
            self._links.set_forked_from(connection, new_id, link.model_dump(by_alias=True))
        # A fork is the root of its own tree, so it opens its own ledger, as thread.init does.
        limits = Budget().stricter(snapshot.agent.budget)
        store.budgets.open(new_id, limits, now=now)
        return messages

    def _rollback_event(self, thread_id: str, kind: str, payload: dict[str, object]) -> None:
        event = Event(
            type=kind,
            event_id=f"{thread_id}:{kind}:{now_iso()}",
            timestamp=now_iso(),
            thread_id=thread_id,
            payload=payload,
        )
        self._store.events.append([event])


def _carry_over(
    thread_id: str,
    session_id: str,
    snapshot: DefinitionSnapshot,
    messages: list[Message],
    point: Point,
    link: ForkLink,
) -> ThreadCarryOver:
    """The memory the fork's first run starts with: the copied transcript indexed, and the
    facts that announce the fork, written by the run as a continued run writes its own."""
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
        for m in messages
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
    return ThreadCarryOver(
        snapshot=snapshot,
        status="waiting_input",
        index=kept,
        index_base=len(index) - len(kept),
        counters=Counters(
            messages=max((m.position for m in messages), default=-1) + 1,
            turns=len(point.turns),
        ),
        outbox=announce,
    )
