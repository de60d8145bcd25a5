"""Tenant quotas over HTTP (docs/tenants.md#quotas): a start or a message refused with 429
naming the quota, before anything reaches Temporal, so nothing is half done."""

from __future__ import annotations

import asyncio

from weft.api.context import ApiContext
from weft.api.gateway.app import GatewayError
from weft.contract.tenants import DEFAULT_TENANT
from weft.store.tenant_quotas import QuotaExceeded

QUOTA_STATUS = 429


def refused(err: QuotaExceeded) -> GatewayError:
    """The 429 reply of a refusal: its message names the quota, the tenant and the count."""
    return GatewayError(QUOTA_STATUS, str(err))


async def require_start_quota(ctx: ApiContext, tenant: str | None) -> None:
    """429 when `tenant` (None: `default`) may not start another thread now."""
    try:
        await asyncio.to_thread(ctx.store.tenant_quotas.check_start, tenant or DEFAULT_TENANT)
    except QuotaExceeded as err:
        raise refused(err) from None


async def require_budget_quota(ctx: ApiContext, thread_id: str) -> None:
    """429 when the tenant of `thread_id` has spent its budget: a new message would only
    be refused by its model call."""
    try:
        await asyncio.to_thread(ctx.store.tenant_quotas.check_budget_of_thread, thread_id)
    except QuotaExceeded as err:
        raise refused(err) from None


__all__ = ["QUOTA_STATUS", "refused", "require_budget_quota", "require_start_quota"]
