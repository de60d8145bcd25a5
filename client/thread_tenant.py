"""Which tenant a thread belongs to, and the visibility clause of one tenant's threads, for
the client, the CLI and the HTTP API (api/auth.py, which words Temporal's silence as a 503).

A thread's tenant is its store row's once its first activity wrote it; before that, its
`WeftTenant` search attribute, set at its start (none: `default`, docs/tenants.md)."""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.tenants import DEFAULT_TENANT, tenant_clause
from weft.contract.thread import WORKFLOW_TYPE
from weft.store import Store
from weft.workflows.search_attributes import TENANT


async def thread_tenant(client: Client | None, store: Store | None, thread_id: str) -> str | None:
    """The thread's tenant; None for a thread neither the store nor Temporal (when given a
    client) knows, and for a workflow that is no thread (a task's, a job's, a schedule's
    run). RPCError when Temporal does not answer."""
    if store is not None:
        stored = await asyncio.to_thread(store.threads.tenant, thread_id)
        if stored is not None:
            return stored
    if client is None:
        return None
    try:
        described = await client.get_workflow_handle(thread_id).describe()
    except RPCError as err:
        if err.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            return None
        raise
    if described.workflow_type != WORKFLOW_TYPE:
        # A task's or job's run records no `WeftTenant`: read as `default`'s, any tenant's
        # task or job would open to `default` through the thread commands and routes.
        return None
    return described.typed_search_attributes.get(TENANT) or DEFAULT_TENANT


def tenant_id_prefix(tenant: str) -> str:
    """The start of the thread ids a caller acting for `tenant` may choose for new threads:
    `<tenant>:`. No tenant name holds a `:`, and no generated id does, so no other tenant
    (and no id weft makes) lands in this space."""
    return f"{tenant}:"


def chosen_id_refusal(holder: str | None, thread_id: str, tenant: str) -> str | None:
    """Why a caller acting for `tenant` may not name `thread_id` for a new thread (a start,
    a fork, an import), given the tenant holding it (`thread_tenant`; None: no thread), or
    None when it may: one of the tenant's own threads, or a free id in its own space.

    Thread ids are one namespace shared by every tenant, so an answer that depended on
    whether another tenant holds an id (taken versus free) would tell the caller that
    tenant's thread exists. This one depends only on what the caller can learn anyway:
    whether the id is its own thread, and its shape. An id elsewhere is refused alike
    whether free, another tenant's, or a task's log."""
    prefix = tenant_id_prefix(tenant)
    if holder == tenant or (holder is None and thread_id.startswith(prefix)):
        return None
    return (
        f"thread id {thread_id!r} is not available to tenant {tenant!r}: a tenant names one "
        f"of its own threads, or a new id that begins with {prefix!r} (thread ids are shared "
        "by every tenant)"
    )


async def check_chosen_id(client: Client, store: Store | None, thread_id: str, tenant: str) -> None:
    """ValueError unless a caller acting for `tenant` may name `thread_id` for a new thread
    (`chosen_id_refusal`)."""
    holder = await thread_tenant(client, store, thread_id)
    refusal = chosen_id_refusal(holder, thread_id, tenant)
    if refusal is not None:
        raise ValueError(refusal)


__all__ = [
    "check_chosen_id",
    "chosen_id_refusal",
    "tenant_clause",
    "tenant_id_prefix",
    "thread_tenant",
]
