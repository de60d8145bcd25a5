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
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from weft.activities.clock import now_iso
from weft.client.fork_definitions import fork_snapshot, source_start
from weft.client.fork_points import Point, resolve
from weft.client.fork_seed import carry_over, fork_seed
from weft.client.thread_ids import new_thread_id
from weft.contract.correlation import default_session_id
from weft.contract.events import Event
from weft.contract.forks import ForkLink, ForkRefused, ForkResult
from weft.contract.tenants import DEFAULT_TENANT
from weft.contract.thread import SIGNAL_TERMINATE, WORKFLOW_TYPE, ThreadStartInput
from weft.definitions import Definitions
from weft.store import Store, ThreadRow
from weft.store.fork_rows import ThreadTaken, discard_fork, is_unstarted_fork, seed_fork
from weft.store.history import ThreadLinks
from weft.workflows import search_attributes as attributes

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
        definitions: Definitions | str | Path | Mapping[str, str] | None = None,
        fork_id: str | None = None,
        rewind: bool = False,
    ) -> ForkResult:
        """Start a thread from `thread_id` as of `at` (a turn id: after it ended; or an
        event sequence); `ForkRefused` names the nearest valid points when `at` is inside
        a turn. The fork runs on the source's definitions unless some are given.

        All or nothing: the fork's rows are written in one transaction before its workflow
        starts, and removed again when the start fails, so a retry with the same id finds
        no leftovers (nor does one after a crash between the two: see `_clear_leftovers`)."""
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
        row = ThreadRow(
            thread_id=new_id,
            agent=snapshot.agent.name,
            status="waiting_input",
            session_id=session_id,
            user_id=source.user_id,
            created_at=datetime.now(UTC),
            env=source.env,
            tenant=source.tenant,  # a fork is its source's tenant's
        )
        seed = await asyncio.to_thread(
            fork_seed, self._store, source, events, point, snapshot, row, link
        )
        await self._clear_leftovers(new_id)
        # Content-addressed and immutable: one left by a failed fork is harmless.
        await asyncio.to_thread(
            self._store.snapshots.put,
            snapshot.snapshot_id,
            snapshot.model_dump(mode="json", by_alias=True),
        )
        try:
            await asyncio.to_thread(seed_fork, self._store, seed)
        except ThreadTaken as err:
            raise ForkRefused(f"--id: {err}; give another id") from None
        fork_start = ThreadStartInput(
            agent=snapshot.agent.name,
            session_id=session_id,
            user_id=source.user_id,
            env=start.env,
            options=start.options,
            carry_over=carry_over(seed, session_id, snapshot, point, link),
            tenant=None if source.tenant == DEFAULT_TENANT else source.tenant,
        )
        try:
            await self._start(new_id, fork_start, session_id, thread_id, point)
        except WorkflowAlreadyStartedError:
            await asyncio.to_thread(discard_fork, self._store, new_id)
            raise ForkRefused(
                f"--id: a workflow {new_id!r} already runs in Temporal; give another id"
            ) from None
        except Exception:
            # An RPC that failed may still have started the workflow: its rows stay then.
            if not await self._fork_started(new_id):
                await asyncio.to_thread(discard_fork, self._store, new_id)
            raise
        return ForkResult(thread_id=new_id, forked_from=link, messages=len(seed.messages))

    async def _start(
        self,
        new_id: str,
        fork_start: ThreadStartInput,
        session_id: str,
        source_id: str,
        point: Point,
    ) -> None:
        """Start the fork's workflow, searchable by its source (`WeftForkedFrom`)."""
        agent = fork_start.agent
        await self._client.start_workflow(
            WORKFLOW_TYPE,
            fork_start,
            id=new_id,
            task_queue=self._task_queue,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(attributes.AGENT, agent),
                    SearchAttributePair(attributes.STATUS, "waiting_input"),
                    SearchAttributePair(attributes.SESSION, session_id),
                    SearchAttributePair(attributes.FORKED_FROM, source_id),
                    *(
                        [SearchAttributePair(attributes.TENANT, fork_start.tenant)]
                        if fork_start.tenant
                        else []
                    ),
                ]
            ),
            static_summary=f"{agent}: fork of {source_id} at event {point.sequence}",
        )

    async def _clear_leftovers(self, new_id: str) -> None:
        """Remove the rows of an earlier fork under `new_id` that never started (the process
        stopped between its commit and its start), so a retry with the same id can go on.
        Rows whose workflow did start (and has not written yet) are kept: the id is taken."""
        if await asyncio.to_thread(is_unstarted_fork, self._store, new_id):
            if not await self._fork_started(new_id):
                await asyncio.to_thread(discard_fork, self._store, new_id)

    async def _fork_started(self, workflow_id: str) -> bool:
        """Whether Temporal holds a fork's workflow under `workflow_id` (an agent thread
        with `WeftForkedFrom`); True when it cannot tell, so rows are kept then."""
        try:
            description = await self._client.get_workflow_handle(workflow_id).describe()
        except RPCError as err:
            return err.status != RPCStatusCode.NOT_FOUND
        forked_from = description.typed_search_attributes.get(attributes.FORKED_FROM)
        return description.workflow_type == WORKFLOW_TYPE and forked_from is not None

    async def rewind(
        self,
        thread_id: str,
        *,
        at: str | int,
        reason: str | None = None,
        agent: str | None = None,
        model: str | None = None,
        prompt: str | None = None,
        definitions: Definitions | str | Path | Mapping[str, str] | None = None,
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

    def _rollback_event(self, thread_id: str, kind: str, payload: dict[str, object]) -> None:
        event = Event(
            type=kind,
            event_id=f"{thread_id}:{kind}:{now_iso()}",
            timestamp=now_iso(),
            thread_id=thread_id,
            payload=payload,
        )
        self._store.events.append([event])
