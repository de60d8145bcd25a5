"""Per-tenant quotas (docs/tenants.md#quotas): how many threads a tenant may have open at
once, and a budget (tokens, cost) over all its threads.

The tenant's spend rides on the budget ledger's charge (`store/budgets.py`): the same
transaction that newly stores a model attempt's `cost.recorded` adds it to the tenant's
row, so a retried write never counts twice. Spend is counted from when the tenant's quota
row exists (`weft tenant quota set`); `clear` forgets it.

A model call pays nothing for quotas it does not have: the quota row is read in the
statement that reads the call's budget ledger (`ledger_and_quota`, a join on the root
thread's tenant), and the charge updates the row that read found, by its key, or nothing
when it found none. So a call that began before its tenant's first quota was set is not
counted (its read found no row), nor is it refused.

Active threads are counted from the `threads` table: a thread's row is written by its
worker's `thread.init`, so a start whose row is not written yet is not counted. The check
runs under the tenant row's lock (a write transaction), which serializes the checks of one
tenant; starts of one tenant that run at the same moment can still each pass before the
other's row is written, so the bound may be overshot by the starts in flight (a start over
HTTP waits for its row before it answers, so starts made one after another are exact).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from sqlalchemy import Connection, Row, String, bindparam, delete, func, select, update

from weft.contract.tenants import check_tenant
from weft.store.database import Database
from weft.store.tables import budgets, tenant_quotas, threads
from weft.store.threads import CLOSED_STATUSES

QuotaName = Literal["maxActiveThreads", "maxTokens", "maxCostUsd"]


@dataclass(frozen=True)
class TenantQuota:
    """A tenant's limits (None: no limit on that measure) and what its threads spent since
    the quota was set."""

    tenant: str
    max_active_threads: int | None
    max_tokens: int | None
    max_cost_usd: float | None
    tokens: int
    cost_usd: float
    updated_at: datetime

    def spent_limit(self) -> QuotaName | None:
        """The budget limit the tenant has reached, or None."""
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            return "maxTokens"
        if self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd:
            return "maxCostUsd"
        return None

    def blocked_payload(self, root_thread_id: str) -> dict[str, Any] | None:
        """The `quota.blocked` payload of a model call this quota refuses, or None when
        the tenant has budget left."""
        limit = self.spent_limit()
        if limit is None:
            return None
        spent, cap = (
            (self.tokens, self.max_tokens)
            if limit == "maxTokens"
            else (self.cost_usd, self.max_cost_usd)
        )
        return {
            "rootThreadId": root_thread_id,
            "tenant": self.tenant,
            "limit": "tokens" if limit == "maxTokens" else "costUsd",
            "spent": spent,
            "limitValue": cap,
            "scope": "tenant",
        }

    def as_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "maxActiveThreads": self.max_active_threads,
            "maxTokens": self.max_tokens,
            "maxCostUsd": self.max_cost_usd,
            "spent": {"tokens": self.tokens, "costUsd": self.cost_usd},
            "updatedAt": self.updated_at.isoformat(),
        }


class QuotaExceeded(RuntimeError):
    """A start or a message refused because the tenant is at one of its quotas; the
    message names the quota, the tenant and the count (HTTP answers 429 with it)."""

    def __init__(self, tenant: str, quota: QuotaName, used: float, limit: float) -> None:
        what = {
            "maxActiveThreads": "active threads",
            "maxTokens": "tokens spent",
            "maxCostUsd": "cost spent (USD)",
        }[quota]
        super().__init__(
            f"tenant {tenant!r} is at its quota {quota} ({what}: {used:g} of {limit:g}); "
            + (
                "close one of its threads, or raise it with `weft tenant quota set`"
                if quota == "maxActiveThreads"
                else "raise it with `weft tenant quota set`"
            )
        )
        self.tenant = tenant
        self.quota = quota
        self.used = used
        self.limit = limit


def _positive(value: float | None, name: str) -> None:
    if value is not None and value <= 0:
        raise ValueError(f"{name}: must be greater than 0, got {value:g}")


# Every model charge runs it: built once, so SQLAlchemy keeps its cache key. The tenant is
# the tree's root thread's (a tree shares its tenant); a tenant without a quota row has
# nothing to update.
_CHARGE_TENANT = (
    update(tenant_quotas)
    .where(
        tenant_quotas.c.tenant
        == select(threads.c.tenant)
        .where(threads.c.thread_id == bindparam("thread"))
        .scalar_subquery()
    )
    .values(
        tokens=tenant_quotas.c.tokens + bindparam("add_tokens"),
        cost_usd=tenant_quotas.c.cost_usd + bindparam("add_cost"),
    )
)

_QUOTA_OF_THREAD = select(tenant_quotas).where(
    tenant_quotas.c.tenant
    == select(threads.c.tenant).where(threads.c.thread_id == bindparam("thread")).scalar_subquery()
)


# A model call's charge when its step read found the tenant's quota row: by the key.
_CHARGE_QUOTA = (
    update(tenant_quotas)
    .where(tenant_quotas.c.tenant == bindparam("quota_tenant"))
    .values(
        tokens=tenant_quotas.c.tokens + bindparam("add_tokens"),
        cost_usd=tenant_quotas.c.cost_usd + bindparam("add_cost"),
    )
)


def charge_tenant(connection: Connection, thread_id: str, tokens: int, cost_usd: float) -> None:
    """Add a newly stored charge to the quota row of `thread_id`'s tenant, if it has one
    (called in the transaction that stores the charge's `cost.recorded`)."""
    connection.execute(
        _CHARGE_TENANT, {"thread": thread_id, "add_tokens": tokens, "add_cost": cost_usd}
    )


def charge_quota(connection: Connection, tenant: str, tokens: int, cost_usd: float) -> None:
    """`charge_tenant` for a charge whose call read `tenant`'s quota row with its ledger
    (`ledger_and_quota`): the row by its key, no lookup of the tenant."""
    connection.execute(
        _CHARGE_QUOTA, {"quota_tenant": tenant, "add_tokens": tokens, "add_cost": cost_usd}
    )


@dataclass(frozen=True)
class LedgerAndQuota:
    """What a model call checks before it asks the provider, as one statement read it."""

    ledger: Row[Any] | None  # the tree's budget ledger row (budget_rows.state_of reads it)
    quota: TenantQuota | None  # its tenant's quota row, spent or not; None: it has none


# Every model call reads it: built once, so SQLAlchemy keeps its cache key. A one-row
# anchor holds the key, so the row comes back whether or not a ledger or a quota exists;
# the quota's columns are renamed apart from the ledger's (both have tokens, cost_usd).
_ANCHOR = select(bindparam("key", type_=String).label("anchor_key")).subquery("anchor")
_LEDGER_AND_QUOTA = select(
    *budgets.c, *(column.label(f"quota_{column.name}") for column in tenant_quotas.c)
).select_from(
    _ANCHOR.outerjoin(budgets, budgets.c.root_thread_id == _ANCHOR.c.anchor_key)
    .outerjoin(threads, threads.c.thread_id == _ANCHOR.c.anchor_key)
    .outerjoin(tenant_quotas, tenant_quotas.c.tenant == threads.c.tenant)
)


def ledger_and_quota(
    connection: Connection, root_thread_id: str | None, thread_id: str
) -> LedgerAndQuota:
    """The ledger of `root_thread_id` (None without one) and the quota of its tenant (a tree
    shares its tenant), in one statement: the read a call makes of its ledger anyway. A
    call charged to no ledger (histories from before budgets) has its own thread's
    tenant's quota read alone."""
    row = connection.execute(_LEDGER_AND_QUOTA, {"key": root_thread_id or thread_id}).one()
    quota = (
        None
        if row.quota_tenant is None
        else _quota({c.name: row._mapping[f"quota_{c.name}"] for c in tenant_quotas.c})
    )
    # The ledger's columns keep their names: the row is read as a ledger row as it is.
    ledger = None if root_thread_id is None or row.root_thread_id is None else row
    return LedgerAndQuota(ledger, quota)


def quota_of_thread(connection: Connection, thread_id: str) -> TenantQuota | None:
    """The quota of `thread_id`'s tenant, or None (no row, or no quota)."""
    row = connection.execute(_QUOTA_OF_THREAD, {"thread": thread_id}).mappings().first()
    return None if row is None else _quota(row)


def _quota(row: Any) -> TenantQuota:
    return TenantQuota(
        tenant=row["tenant"],
        max_active_threads=row["max_active_threads"],
        max_tokens=row["max_tokens"],
        max_cost_usd=row["max_cost_usd"],
        tokens=int(row["tokens"]),
        cost_usd=float(row["cost_usd"]),
        updated_at=row["updated_at"],
    )


class TenantQuotas:
    """The `tenant_quotas` table: limits and spend per tenant, and the checks against them."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def set(
        self,
        tenant: str,
        *,
        max_active_threads: int | None,
        max_tokens: int | None,
        max_cost_usd: float | None,
    ) -> TenantQuota:
        """Set `tenant`'s limits (None: no limit), keeping what it spent so far."""
        check_tenant(tenant)
        _positive(max_active_threads, "maxActiveThreads")
        _positive(max_tokens, "maxTokens")
        _positive(max_cost_usd, "maxCostUsd")
        limits = {
            "max_active_threads": max_active_threads,
            "max_tokens": max_tokens,
            "max_cost_usd": max_cost_usd,
            "updated_at": datetime.now(UTC),
        }
        statement = (
            self._db.insert(tenant_quotas)
            .values(tenant=tenant, tokens=0, cost_usd=0.0, **limits)
            .on_conflict_do_update(index_elements=["tenant"], set_=limits)
        )
        with self._db.write() as connection:
            connection.execute(statement)
            row = connection.execute(
                select(tenant_quotas).where(tenant_quotas.c.tenant == tenant)
            ).mappings()
            return _quota(row.one())

    def get(self, tenant: str) -> TenantQuota | None:
        """`tenant`'s quota, or None when it has none."""
        check_tenant(tenant)
        with self._db.read() as connection:
            row = (
                connection.execute(select(tenant_quotas).where(tenant_quotas.c.tenant == tenant))
                .mappings()
                .first()
            )
        return None if row is None else _quota(row)

    def clear(self, tenant: str) -> bool:
        """Drop `tenant`'s quota and its spend; whether it had one."""
        check_tenant(tenant)
        with self._db.write() as connection:
            result = connection.execute(
                delete(tenant_quotas).where(tenant_quotas.c.tenant == tenant)
            )
        return bool(result.rowcount)

    def active_threads(self, tenant: str) -> int:
        """How many of `tenant`'s threads are open (their rows not closed)."""
        with self._db.read() as connection:
            return _active(connection, tenant)

    def check_start(self, tenant: str) -> None:
        """QuotaExceeded when `tenant` may not start another thread now: at its
        `maxActiveThreads`, or over its budget (a new thread's first turn would be refused).

        Runs in a write transaction that locks the tenant's row, so one tenant's checks
        run one at a time (the module's docstring says what this bounds).
        """
        with self._db.write() as connection:
            row = (
                connection.execute(
                    select(tenant_quotas).where(tenant_quotas.c.tenant == tenant).with_for_update()
                )
                .mappings()
                .first()
            )
            if row is None:
                return
            quota = _quota(row)
            _refuse_spent(quota)
            if quota.max_active_threads is not None:
                active = _active(connection, tenant)
                if active >= quota.max_active_threads:
                    raise QuotaExceeded(
                        tenant, "maxActiveThreads", active, quota.max_active_threads
                    )

    def check_budget_of_thread(self, thread_id: str) -> None:
        """QuotaExceeded when the tenant of `thread_id` has spent its budget."""
        with self._db.read() as connection:
            quota = quota_of_thread(connection, thread_id)
        if quota is not None:
            _refuse_spent(quota)


def _refuse_spent(quota: TenantQuota) -> None:
    spent = quota.spent_limit()
    if spent == "maxTokens" and quota.max_tokens is not None:
        raise QuotaExceeded(quota.tenant, spent, quota.tokens, quota.max_tokens)
    if spent == "maxCostUsd" and quota.max_cost_usd is not None:
        raise QuotaExceeded(quota.tenant, spent, quota.cost_usd, quota.max_cost_usd)


def _active(connection: Connection, tenant: str) -> int:
    query = (
        select(func.count())
        .select_from(threads)
        .where(threads.c.tenant == tenant, threads.c.status.not_in(CLOSED_STATUSES))
    )
    return int(connection.execute(query).scalar_one())


__all__ = [
    "LedgerAndQuota",
    "QuotaExceeded",
    "QuotaName",
    "TenantQuota",
    "TenantQuotas",
    "charge_quota",
    "charge_tenant",
    "ledger_and_quota",
    "quota_of_thread",
]
