"""The one place `weft thread …` commands learn that their thread is unknown or closed.

Every subcommand that names a thread runs through `run_thread_command`: the thread is
checked before the command runs, so the user gets one line (`weft: thread 'x' not found`,
`weft: thread 'x' is closed (terminated)`, worded by `client/thread_status.py` as the HTTP
API words it) and exit code 1 instead of Temporal's
RPCError traceback. A thread can still close between the check and the action: Temporal's
NOT_FOUND answer then goes through the same check, so the line is the same.

Commands that only read what a thread wrote (`show`, `tail`, `context`) set
`closed_ok=True`: a closed thread, even one Temporal no longer keeps, is read from the
store; only a thread known to neither is an error for them.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable

from temporalio.client import (
    Client,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from weft.cli.temporal_client import client_from_config
from weft.client.thread_status import closed_message, is_closed
from weft.store import Store
from weft.workers.config import WeftConfig

Handler = Callable[[argparse.Namespace, WeftConfig], Awaitable[int | None]]


class ThreadError(Exception):
    """The named thread is unknown, closed for a command that acts on it, or refused the
    command; the message says which, in one line."""


async def run_thread_command(handler: Handler, args: argparse.Namespace, config: WeftConfig) -> int:
    """Check the thread named by `args.thread_id`, run `handler`, and turn Temporal's
    answers about a missing, closed or refusing thread into `ThreadError`."""
    thread_id: str = args.thread_id
    closed_ok = bool(getattr(args, "closed_ok", False))
    client = await client_from_config(config)
    await check_thread(client, config, thread_id, closed_ok=closed_ok)
    try:
        return int(await handler(args, config) or 0)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        # Closed (or gone) since the check: say which, as the check would have.
        await check_thread(client, config, thread_id, closed_ok=False)
        raise ThreadError(f"thread {thread_id!r}: {err.message}") from None
    except WorkflowUpdateFailedError as err:
        raise ThreadError(f"thread {thread_id!r} refused: {err.cause or err}") from None
    except WorkflowQueryFailedError as err:
        raise ThreadError(f"thread {thread_id!r} did not answer: {err.message}") from None


async def check_thread(
    client: Client, config: WeftConfig, thread_id: str, *, closed_ok: bool
) -> None:
    """Raise `ThreadError` when the thread is unknown, or closed and not `closed_ok`."""
    handle = client.get_workflow_handle(thread_id)
    try:
        described = await handle.describe()
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        # Unknown to Temporal, or past its retention: the store may still hold the thread.
        if not await asyncio.to_thread(_store_knows, config, thread_id):
            raise ThreadError(f"thread {thread_id!r} not found") from None
        if not closed_ok:
            raise ThreadError(
                f"thread {thread_id!r} is closed (past Temporal's retention)"
            ) from None
        return
    if described.status is not None and is_closed(described.status) and not closed_ok:
        raise ThreadError(closed_message(thread_id, described.status))


def _store_knows(config: WeftConfig, thread_id: str) -> bool:
    store = Store.open(config.store_url())
    try:
        return store.threads.get(thread_id) is not None or store.events.last_sequence(thread_id) > 0
    finally:
        store.close()


__all__ = ["ThreadError", "check_thread", "run_thread_command"]
