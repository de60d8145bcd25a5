"""Retention in the store: each tenant's TTL for closed threads, and the closed threads
past their TTL (docs/deletion.md, contract/retention.py).

A thread's close time is its row's `updated_at` once its status is closed: the row's last
write is the close, and a closed thread's row is fenced off from later writes
(store/outcome_fence.py), so the time can only be the close or later, never earlier.
Only threads with no surviving parent are found: a child goes with its parent's deletion,
never before it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, exists, or_, select
from sqlalchemy.orm import aliased

from weft.contract.retention import ExpiredThread, SweepCursor, parse_ttl, shorter
from weft.contract.tenants import check_tenant
from weft.store.database import Database
from weft.store.tables import retention_policies, threads
from weft.store.threads import CLOSED_STATUSES


class RetentionPolicies:
    """The `retention_policies` table, and the query for expired threads."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def set_tenant(self, tenant: str, ttl: str) -> timedelta:
        """Keep `tenant`'s closed threads for `ttl` (`90d`); ValueError naming a bad one."""
        check_tenant(tenant)
        parsed = parse_ttl(ttl, what="--ttl")
        values = {
            "tenant": tenant,
            "closed_threads_ttl": ttl.strip().lower(),
            "ttl_seconds": int(parsed.total_seconds()),
            "updated_at": datetime.now(UTC),
        }
        statement = (
            self._db.insert(retention_policies)
            .values(values)
            .on_conflict_do_update(
                index_elements=["tenant"], set_={k: v for k, v in values.items() if k != "tenant"}
            )
        )
        with self._db.write() as connection:
            connection.execute(statement)
        return parsed

    def clear_tenant(self, tenant: str) -> bool:
        """Drop `tenant`'s TTL; whether it had one."""
        check_tenant(tenant)
        with self._db.write() as connection:
            result = connection.execute(
                delete(retention_policies).where(retention_policies.c.tenant == tenant)
            )
        return bool(result.rowcount)

    def tenants(self) -> dict[str, str]:
        """Each tenant with a TTL, as it was set (`90d`), by tenant."""
        query = select(retention_policies.c.tenant, retention_policies.c.closed_threads_ttl)
        with self._db.read() as connection:
            return {str(t): str(ttl) for t, ttl in connection.execute(query.order_by("tenant"))}

    def expired(
        self,
        now: datetime,
        agent_ttls: dict[str, timedelta],
        *,
        cursor: SweepCursor | None = None,
        limit: int = 50,
    ) -> list[ExpiredThread]:
        """Closed threads without a surviving parent whose TTL (the shorter of their agent's,
        in `agent_ttls`, and their tenant's) has passed by `now`, oldest close first, after
        `cursor`."""
        tenant_ttls = {
            tenant: timedelta(seconds=seconds) for tenant, seconds in self._tenant_seconds().items()
        }
        # Past the shorter of two TTLs is past either one.
        past = [
            and_(threads.c.agent == agent, threads.c.updated_at <= now - ttl)
            for agent, ttl in sorted(agent_ttls.items())
        ] + [
            and_(threads.c.tenant == tenant, threads.c.updated_at <= now - ttl)
            for tenant, ttl in sorted(tenant_ttls.items())
        ]
        if not past:
            return []
        parent = aliased(threads)
        query: Any = select(
            threads.c.thread_id, threads.c.agent, threads.c.tenant, threads.c.updated_at
        ).where(
            threads.c.status.in_(CLOSED_STATUSES),
            or_(*past),
            or_(
                threads.c.parent_thread_id.is_(None),
                ~exists().where(parent.c.thread_id == threads.c.parent_thread_id),
            ),
        )
        if cursor is not None:
            query = query.where(
                or_(
                    threads.c.updated_at > cursor.closed_at,
                    and_(
                        threads.c.updated_at == cursor.closed_at,
                        threads.c.thread_id > cursor.thread_id,
                    ),
                )
            )
        query = query.order_by(threads.c.updated_at, threads.c.thread_id).limit(limit)
        with self._db.read() as connection:
            rows = connection.execute(query).all()
        found = []
        for thread_id, agent, tenant, closed_at in rows:
            ttl = shorter(agent_ttls.get(agent), tenant_ttls.get(tenant))
            assert ttl is not None, "the query matched one of the two"
            found.append(
                ExpiredThread(
                    thread_id=thread_id,
                    agent=agent,
                    tenant=tenant,
                    closed_at=closed_at,
                    ttl_seconds=ttl.total_seconds(),
                )
            )
        return found

    def _tenant_seconds(self) -> dict[str, int]:
        query = select(retention_policies.c.tenant, retention_policies.c.ttl_seconds)
        with self._db.read() as connection:
            return {str(t): int(s) for t, s in connection.execute(query)}


__all__ = ["RetentionPolicies"]
