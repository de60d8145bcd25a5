"""The `subagent_job_summary` of a thread, read from the store (docs/read-models.md).

Everything it shows is in the store as the threads write it: the subagent rows (projected
from `subagent.*` events), each child's thread row and pending actions, the tasks (folded
from `task.*` events) and the jobs that belong to the graph's threads (their rows, folded
from `job.*` events); so it needs no query and reads the same for a running thread and a
closed one. One fact is only live: whether an open child's or job's workflow still runs,
which Temporal is asked for when a client is given (a child it reports closed without a
recorded end is `lost`; a job's end Temporal states and the store lacks is recorded first,
as `Jobs.show` does).

A thread's children are its subagent registry and the threads the tasks it created ran
their attempts in (`store/attempt_threads.py`: the task records state that link).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from temporalio.client import Client
from temporalio.service import RPCError

from weft.client.jobs import record_unwritten_end
from weft.contract.jobs import JobRecord
from weft.contract.subagent_summary import (
    MAX_CHILDREN,
    ChildFacts,
    SubagentJobSummary,
    build_summary,
    last_sessions,
    pending_action_kinds,
)
from weft.contract.tasks import TaskRecord
from weft.store import Store
from weft.store.attempt_threads import attempt_subagents
from weft.store.job_threads import jobs_of_threads

_ACTION_TYPES = ["action.required", "action.resolved"]
_SESSION_TYPES = ["subagent.completed", "subagent.failed"]
_READ_LIMIT = 100_000


def summary_from_store(
    store: Store, thread_id: str, *, workflow_statuses: dict[str, str] | None = None
) -> SubagentJobSummary | None:
    """The summary as the store states it; None for a thread the store does not know.
    `workflow_statuses` (child thread id → Temporal's status) adds what only Temporal knows."""
    read = _read(store, thread_id)
    return None if read is None else _build(store, thread_id, *read, workflow_statuses, None)


async def subagent_summary(
    client: Client | None, store: Store | None, thread_id: str
) -> SubagentJobSummary | None:
    """The summary from the store, with Temporal's status of each open child when a client
    is given. Without a store there is nothing to read it from: `ValueError`."""
    if store is None:
        raise ValueError(
            f"the subagent summary of thread {thread_id} is read from the store, and there is "
            "no store"
        )
    read = await asyncio.to_thread(_read, store, thread_id)
    if read is None:
        return None
    statuses: dict[str, str] | None = None
    job_statuses: dict[str, str] | None = None
    if client is not None:
        unended = [j for j in read[2] if not j.terminal]
        ended = await asyncio.gather(*(record_unwritten_end(client, store, j) for j in unended))
        if any(ended):  # a job's run closed through Temporal: its end is now recorded
            read = await asyncio.to_thread(_read, store, thread_id)
            if read is None:
                return None
        open_ = [_ref(c) for c in read[1] if not c.entry.get("closed")]
        found = await asyncio.gather(*(_status(client, t) for t in open_))
        statuses = dict(zip(open_, found, strict=True))
        open_jobs = [j.job_id for j in read[2] if not j.terminal]
        found = await asyncio.gather(*(_status(client, j) for j in open_jobs))
        job_statuses = dict(zip(open_jobs, found, strict=True))
    return await asyncio.to_thread(_build, store, thread_id, *read, statuses, job_statuses)


def _read(store: Store, thread_id: str) -> tuple[str, list[ChildFacts], list[JobRecord]] | None:
    row = store.threads.get(thread_id)
    if row is None:
        return None
    children = _children(store, thread_id)
    owners = [thread_id, *(_ref(c) for c in children[:MAX_CHILDREN])]
    return row.status, children, jobs_of_threads(store.database, owners)


def _build(
    store: Store,
    thread_id: str,
    status: str,
    children: list[ChildFacts],
    jobs: list[JobRecord],
    workflow_statuses: dict[str, str] | None,
    job_statuses: dict[str, str] | None,
) -> SubagentJobSummary:
    truncated = len(children) > MAX_CHILDREN
    children = children[:MAX_CHILDREN]
    if workflow_statuses is not None:
        children = [
            c.model_copy(update={"workflow_status": workflow_statuses.get(_ref(c))})
            for c in children
        ]
    creators = [thread_id, *(_ref(c) for c in children)]
    tasks = [TaskRecord.model_validate(d) for d in store.subagents.tasks_created_by(creators)]
    return build_summary(
        thread_id,
        thread_status=status,
        children=children,
        tasks=tasks,
        jobs=jobs,
        job_workflow_statuses=job_statuses,
        updated_at=datetime.now(UTC).isoformat(),
        truncated=truncated,
        liveness_checked=workflow_statuses is not None,
    )


async def _status(client: Client, thread_id: str) -> str:
    try:
        described = await client.get_workflow_handle(thread_id).describe()
    except RPCError:
        return "NOT_FOUND"  # unknown to Temporal (never started, or past retention)
    return described.status.name if described.status is not None else "UNKNOWN"


def _ref(child: ChildFacts) -> str:
    return str(child.entry.get("reference") or "")


def _children(store: Store, root: str) -> list[ChildFacts]:
    """The graph under `root`, depth first, each child with what its own log says."""
    found: list[ChildFacts] = []
    seen = {root}

    def walk(parent: str, depth: int) -> None:
        entries = [*store.subagents.list(parent), *attempt_subagents(store, parent)]
        if not entries:
            return
        sessions = last_sessions(store.events.read(parent, limit=_READ_LIMIT, types=_SESSION_TYPES))
        for entry in entries:
            reference = str(entry.get("reference") or "")
            if reference in seen or len(found) > MAX_CHILDREN:
                continue
            seen.add(reference)
            row = store.threads.get(reference)
            found.append(
                ChildFacts(
                    entry=entry,
                    parent_thread_id=parent,
                    depth=depth,
                    last_session=sessions.get(reference),
                    thread_status=None if row is None else row.status,
                    pending_actions=_pending(store, reference, entry),
                )
            )
            walk(reference, depth + 1)

    walk(root, 1)
    return found


def _pending(store: Store, thread_id: str, entry: dict[str, object]) -> list[str]:
    if entry.get("closed"):
        return []  # a closed thread waits on no one
    return pending_action_kinds(
        store.events.read(thread_id, limit=_READ_LIMIT, types=_ACTION_TYPES)
    )
