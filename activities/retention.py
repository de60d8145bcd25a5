"""`retention.find` and `retention.delete`: the `RetentionSweep` workflow's I/O
(docs/deletion.md, "Retention").

`find` reads the next closed threads past their TTL: the agent's `retention` from the
definitions this worker serves (the definitions in force), the tenant's from the store.
`delete` deletes one of them, its children with it, through the deletion machinery
(activities/thread_deletion.py: close, store rows and blobs, every Temporal run), and records each
deleted thread in the audit log as `retention`. A thread nothing is left of was deleted
by someone else meanwhile: that is no failure.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio import activity
from temporalio.client import Client

from weft.activities.thread_deletion import ThreadNotFound, delete_thread
from weft.contract.definitions import AgentDef
from weft.contract.retention import (
    ACTIVITY_RETENTION_DELETE,
    ACTIVITY_RETENTION_FIND,
    RETENTION_SUBJECT,
    RetentionBatch,
    RetentionDeleted,
    RetentionDeleteInput,
    RetentionFindInput,
    SweepCursor,
)
from weft.store import Store
from weft.store.audit import AuditEntry
from weft.store.threads import CLOSED_STATUSES

# Beats while a deletion waits for threads to close and for Temporal to forget them.
_HEARTBEAT_SECONDS = 5.0


def agent_ttls(agents: dict[str, AgentDef]) -> dict[str, timedelta]:
    """Each agent's TTL for its closed threads, of the agents that set one."""
    return {
        name: agent.retention.ttl() for name, agent in agents.items() if agent.retention is not None
    }


class RetentionActivities:
    """Finds expired threads and deletes them; built with the worker's definitions."""

    def __init__(self, store: Store, client: Client, agents: dict[str, AgentDef]) -> None:
        self._store = store
        self._client = client
        self._agents = agents

    @activity.defn(name=ACTIVITY_RETENTION_FIND)
    async def find(self, query: RetentionFindInput) -> RetentionBatch:
        """Up to `limit` expired threads after the cursor, oldest close first."""
        found = await asyncio.to_thread(
            self._store.retention.expired,
            query.now,
            agent_ttls(self._agents),
            cursor=query.cursor,
            limit=query.limit,
        )
        if not found:
            return RetentionBatch(cursor=query.cursor)
        last = found[-1]
        return RetentionBatch(
            threads=found, cursor=SweepCursor(closed_at=last.closed_at, thread_id=last.thread_id)
        )

    @activity.defn(name=ACTIVITY_RETENTION_DELETE)
    async def delete(self, request: RetentionDeleteInput) -> RetentionDeleted:
        """Delete the thread and its children; each deleted thread audited."""
        expired = request.thread
        row = await asyncio.to_thread(self._store.threads.get, expired.thread_id)
        if row is not None and (
            row.status not in CLOSED_STATUSES or row.updated_at != expired.closed_at
        ):
            # A thread started again under the same id since it was found is not the one
            # that expired.
            return RetentionDeleted(
                thread_id=expired.thread_id, error="changed since the sweep found it; kept"
            )
        beat = asyncio.create_task(_heartbeat())
        try:
            report = await delete_thread(
                self._client,
                self._store,
                expired.thread_id,
                children=True,
                grace=request.grace_seconds,
            )
        except ThreadNotFound:
            return RetentionDeleted(thread_id=expired.thread_id, gone=True)
        finally:
            beat.cancel()
        for thread_id in report.thread_ids:
            await asyncio.to_thread(self._store.audit.record, _audit_entry(thread_id))
        return RetentionDeleted(thread_id=expired.thread_id, deleted=report.thread_ids)


def _audit_entry(thread_id: str) -> AuditEntry:
    return AuditEntry(
        at=datetime.now(UTC),
        subject=RETENTION_SUBJECT,
        tenant=None,
        method="DELETE",
        route="/threads/{thread_id}",
        path=f"/threads/{thread_id}",
        thread_id=thread_id,
        status=200,
    )


async def _heartbeat() -> None:
    timeout = activity.info().heartbeat_timeout
    every = _HEARTBEAT_SECONDS
    if timeout is not None:
        every = min(every, timeout.total_seconds() / 4)
    while True:
        activity.heartbeat()
        await asyncio.sleep(every)


__all__ = ["RetentionActivities", "agent_ttls"]
