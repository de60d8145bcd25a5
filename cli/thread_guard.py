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

It is also where the CLI learns whom it acts for. Without `weft --tenant T` (or
`WEFT_TENANT`) it is the operator, over every tenant. With it (`confine_to_tenant`, run
once before any command), a thread of another tenant is `not found`, worded as an unknown
one (a task or job: `no task 'x'`, by cli/tenant_scope.py); a command's own `--tenant`
defaults to T and may not name another; and a command that cannot keep to one tenant
refuses to run. Who acts is `cli:<os user>` in the audit log
(`acting_threads`, `audit_trail`).
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from temporalio.client import (
    Client,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
)
from temporalio.service import RPCError, RPCStatusCode

from weft.cli.temporal_client import client_from_config
from weft.client.audit_trail import CLI_SUBJECT, SUBJECT_LENGTH, AuditTrail
from weft.client.thread_status import closed_message, is_closed
from weft.client.thread_tenant import check_chosen_id, thread_tenant
from weft.client.threads import Threads
from weft.contract.tenants import check_tenant
from weft.store import Store
from weft.workers.config import WeftConfig

TENANT_VARIABLE = "WEFT_TENANT"
# Commands that reach no tenant's threads or records: they run as they are under --tenant.
NO_TENANT_DATA = frozenset({"dev", "worker", "demo", "code", "codec", "serve"})
# `weft thread` actions that keep to the tenant without naming a thread: `start` (its own
# --tenant) and `list` (a visibility clause).
TENANT_THREAD_ACTIONS = frozenset({"start", "list"})
# Commands that keep to the tenant themselves: the inbox (a visibility clause), tasks and
# jobs (cli/tenant_scope.py: another tenant's is not found, listings and creates are T's),
# schedules (cli/schedule_command.py: likewise, through `Schedules(tenant=)`).
TENANT_SCOPED_COMMANDS = frozenset({"inbox", "task", "job", "schedule"})

Handler = Callable[[argparse.Namespace, WeftConfig], Awaitable[int | None]]


class ThreadError(Exception):
    """The named thread is unknown, closed for a command that acts on it, or refused the
    command; the message says which, in one line."""


def confine_to_tenant(args: argparse.Namespace) -> str | None:
    """The tenant the CLI acts for (`--tenant`, else `WEFT_TENANT`; None: every tenant),
    kept in `args.acting_tenant`; ValueError when it is no tenant's name, when the
    command's own `--tenant` names another, or when the command cannot keep to it."""
    acting = args.acting_tenant or os.environ.get(TENANT_VARIABLE) or None
    if acting is None:
        return None
    where = "--tenant" if args.acting_tenant else TENANT_VARIABLE
    try:
        args.acting_tenant = check_tenant(acting)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if args.command in NO_TENANT_DATA:
        return acting
    if hasattr(args, "tenant"):  # a command that names a tenant acts for this one
        if args.tenant is None:
            args.tenant = acting
        elif args.tenant != acting:
            raise ValueError(
                f"tenant {args.tenant!r}: the CLI acts for tenant {acting!r} ({where})"
            )
        return acting
    names_thread = _named_thread(args) is not None
    if args.command in TENANT_SCOPED_COMMANDS or (
        args.command == "thread" and (names_thread or args.action in TENANT_THREAD_ACTIONS)
    ):
        return acting
    command = f"thread {args.action}" if args.command == "thread" else args.command
    raise ValueError(
        f"{command} does not act for one tenant yet: run it without {where} (as the "
        "operator, over every tenant)"
    )


def _named_thread(args: argparse.Namespace) -> str | None:
    """The thread a `weft thread` command acts on: `thread_id`, or `delete`'s target."""
    named = getattr(args, "thread_id", None) or getattr(args, "target", None)
    return named if isinstance(named, str) else None


def cli_subject() -> str:
    """Who the CLI acts as in the audit log: `cli:<os user>` (`cli` when the OS names
    nobody), cut to the log's subject column."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):
        return CLI_SUBJECT
    return f"{CLI_SUBJECT}:{user}"[:SUBJECT_LENGTH] if user else CLI_SUBJECT


def audit_trail(store: Store) -> AuditTrail:
    """The CLI's audit trail over `store`, for actions on the store alone (keys, quotas,
    retention)."""
    return AuditTrail(store, cli_subject())


async def check_new_thread_id(
    args: argparse.Namespace, config: WeftConfig, thread_id: str | None
) -> None:
    """Under `weft --tenant T`, ValueError unless T may name `thread_id` for a new thread
    (a start's `--id`, a fork's): its own thread or a free `T:` id, as over HTTP
    (client/thread_tenant.py `chosen_id_refusal`), so a start learns nothing of another
    tenant's thread ids."""
    tenant: str | None = getattr(args, "acting_tenant", None)
    if tenant is None or thread_id is None:
        return
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        await check_chosen_id(client, store, thread_id, tenant)
    finally:
        store.close()


@asynccontextmanager
async def acting_threads(config: WeftConfig) -> AsyncIterator[Threads]:
    """`Threads` as the CLI uses them: over the configured store (blobs for large
    messages, the audit log), each control action recorded as `cli:<os user>`."""
    client = await client_from_config(config)
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        yield Threads(
            client, task_queue=config.temporal.task_queue, store=store, audit_as=cli_subject()
        )
    finally:
        store.close()


async def run_thread_command(handler: Handler, args: argparse.Namespace, config: WeftConfig) -> int:
    """Check the thread named by `args.thread_id`, run `handler`, and turn Temporal's
    answers about a missing, closed or refusing thread into `ThreadError`.

    `delete` names its thread otherwise (it reaches threads Temporal no longer knows, and
    says itself when nothing is left): only the tenant is checked for it."""
    tenant: str | None = getattr(args, "acting_tenant", None)
    if getattr(args, "thread_id", None) is None:
        target = _named_thread(args)
        if tenant is not None and target is not None:
            await check_tenant_of(await client_from_config(config), config, target, tenant)
        return int(await handler(args, config) or 0)
    client = await client_from_config(config)
    thread_id: str = args.thread_id
    closed_ok = bool(getattr(args, "closed_ok", False))
    if tenant is not None:
        await check_tenant_of(client, config, thread_id, tenant)
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


async def check_tenant_of(client: Client, config: WeftConfig, thread_id: str, tenant: str) -> None:
    """`ThreadError`, worded as for an unknown thread, unless the thread is `tenant`'s: the
    CLI acting for a tenant never learns whether another tenant's thread exists."""
    store = await asyncio.to_thread(Store.open, config.store_url())
    try:
        found = await thread_tenant(client, store, thread_id)
    finally:
        store.close()
    if found != tenant:
        raise ThreadError(f"thread {thread_id!r} not found")


def _store_knows(config: WeftConfig, thread_id: str) -> bool:
    store = Store.open(config.store_url())
    try:
        return store.threads.get(thread_id) is not None or store.events.last_sequence(thread_id) > 0
    finally:
        store.close()


__all__ = [
    "check_new_thread_id",
    "TENANT_VARIABLE",
    "ThreadError",
    "acting_threads",
    "audit_trail",
    "check_tenant_of",
    "check_thread",
    "cli_subject",
    "confine_to_tenant",
    "run_thread_command",
]
