"""The `context_boundary_snapshot` of a thread: live by query, or rebuilt from the store.

A running thread answers the query with its live budget (`contextState`). Boundaries are
stored as they are written, so a closed thread, or one no worker answers for, still shows
its compactions; what only the workflow knows is named in `missingFacts`, not guessed.
This lives apart from `resume.py` because `Threads` uses it and `resume` imports `threads`.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import Client

from weft.client.liveness import QUERY_TIMEOUT, UNANSWERED, is_running
from weft.contract.context import QUERY_CONTEXT_BOUNDARY, boundary_snapshot
from weft.store import Store

CLOSED = "contextState: the thread is closed; its live budget is not known"
UNANSWERED_QUERY = (
    "contextState: the running thread did not answer the query; its live budget is not known"
)


def context_from_store(
    store: Store, thread_id: str, *, missing: str = CLOSED
) -> dict[str, Any] | None:
    """The snapshot from stored boundaries; None for a thread the store does not know."""
    boundaries = store.boundaries.list(thread_id)
    if not boundaries and store.threads.get(thread_id) is None:
        return None
    return boundary_snapshot(thread_id, boundaries, missing=[missing])


async def context_snapshot(
    client: Client, store: Store | None, thread_id: str
) -> dict[str, Any] | None:
    """The live snapshot by query; from the store when the thread cannot answer.

    Without a store, a thread that cannot answer is an error rather than an empty snapshot
    that would look like a thread that never compacted.
    """
    missing = CLOSED
    if await is_running(client, thread_id):
        try:
            found: dict[str, Any] = await client.get_workflow_handle(thread_id).query(
                QUERY_CONTEXT_BOUNDARY, rpc_timeout=QUERY_TIMEOUT
            )
            return found
        except UNANSWERED:
            missing = UNANSWERED_QUERY  # no worker answered: fall back to the stored boundaries
    if store is None:
        raise ValueError(
            f"thread {thread_id} cannot answer the {QUERY_CONTEXT_BOUNDARY} query (closed, "
            "or no worker replied) and there is no store to read its boundaries from"
        )
    return await asyncio.to_thread(context_from_store, store, thread_id, missing=missing)
