"""Ending an eval's threads for good before its worker stops."""

from __future__ import annotations

import asyncio
import contextlib

from temporalio.client import WorkflowFailureError
from temporalio.service import RPCError

from weft.client.threads import Threads

# How long a case's thread (and its subagents) may take to end after its terminate.
CLOSE_TIMEOUT = 30.0


async def end_thread(threads: Threads, thread_id: str, reason: str) -> None:
    """Terminate a thread and wait until it has closed: the eval's worker stops with the
    suite, and a thread still open then would stay running with no worker to end it. One
    that does not close in time is terminated by Temporal."""
    handle = threads.handle(thread_id)
    with contextlib.suppress(Exception):  # an already closed thread is fine
        await threads.terminate(thread_id, reason)
    try:
        async with asyncio.timeout(CLOSE_TIMEOUT):
            with contextlib.suppress(WorkflowFailureError):  # closed is what matters
                await handle.result()
    except TimeoutError:
        with contextlib.suppress(RPCError):  # it closed meanwhile
            await handle.terminate(reason)
