"""Whether a thread can answer a query, shared by every read model that falls back to the store.

A query needs a running workflow and a worker that replies: a closed thread (or one past
Temporal's retention) is read from the store instead, and so is a running one whose query
fails or times out, because a client must not hang on a thread no worker serves.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.service import RPCError

QUERY_TIMEOUT = timedelta(seconds=10)
# What a query raises when no worker answers it (or the worker cannot run it).
UNANSWERED = (RPCError, WorkflowQueryFailedError)


async def is_running(client: Client, thread_id: str) -> bool:
    """True when Temporal reports the thread's workflow running."""
    try:
        described = await client.get_workflow_handle(thread_id).describe()
    except RPCError:
        return False  # unknown to Temporal (or past retention): the store may know it
    return described.status == WorkflowExecutionStatus.RUNNING
