"""Which tenant a thread belongs to, and the visibility clause of one tenant's threads, for
the client, the CLI and the HTTP API (api/auth.py, which words Temporal's silence as a 503).

A thread's tenant is its store row's once its first activity wrote it; before that, its
`WeftTenant` search attribute, set at its start (none: `default`, docs/tenants.md)."""

from __future__ import annotations

import asyncio

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from weft.contract.tenants import DEFAULT_TENANT, check_tenant
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


def tenant_clause(tenant: str) -> str:
    """The visibility clause that keeps a listing to `tenant`'s threads; a thread started
    without a tenant has no `WeftTenant` and is `default`'s. ValueError for a name that is
    not a tenant's (which could not be quoted safely either)."""
    check_tenant(tenant)
    if tenant == DEFAULT_TENANT:
        return f"(WeftTenant = '{DEFAULT_TENANT}' OR WeftTenant IS NULL)"
    return f"WeftTenant = '{tenant}'"


__all__ = ["tenant_clause", "thread_tenant"]
