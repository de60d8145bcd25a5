"""The audit log: who did each control action, for which tenant, and how it ended
(docs/tenants.md#audit). `weft serve` writes one entry per authenticated POST and DELETE
when its reply starts; the CLI and the Python client one per control action once its
outcome is known (client/audit_trail.py); `weft audit` reads them."""

from __future__ import annotations

import builtins
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import RowMapping, select

from weft.store.database import Database
from weft.store.tables import audit_log


@dataclass(frozen=True)
class AuditEntry:
    """One control action: who (`subject`: a key id, `jwt:<sub>` or `token` over HTTP,
    `cli:<user>` or `python`), the `tenant` acted on (a tenant's key acts on its own; an
    operator's action names the tenant of the thread, task or job it named), what
    (`method`, the `route` template, the `path`, the thread it names) and its `status`."""

    at: datetime
    subject: str
    tenant: str | None
    method: str
    route: str
    path: str
    thread_id: str | None
    status: int


class AuditLog:
    """The `audit_log` table."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def record(self, entry: AuditEntry) -> None:
        with self._db.write() as connection:
            connection.execute(
                audit_log.insert().values(
                    audit_id=uuid.uuid4().hex,
                    at=entry.at,
                    subject=entry.subject,
                    tenant=entry.tenant,
                    method=entry.method,
                    route=entry.route,
                    path=entry.path,
                    thread_id=entry.thread_id,
                    status=entry.status,
                )
            )

    def list(
        self,
        *,
        thread_id: str | None = None,
        tenant: str | None = None,
        subject: str | None = None,
        limit: int = 100,
    ) -> builtins.list[AuditEntry]:
        """The newest `limit` entries (of a thread, a tenant, a subject), oldest first."""
        query = select(audit_log)
        if thread_id is not None:
            query = query.where(audit_log.c.thread_id == thread_id)
        if tenant is not None:
            query = query.where(audit_log.c.tenant == tenant)
        if subject is not None:
            query = query.where(audit_log.c.subject == subject)
        query = query.order_by(audit_log.c.at.desc(), audit_log.c.audit_id).limit(limit)
        with self._db.read() as connection:
            rows = connection.execute(query).mappings().all()
        return [_entry(row) for row in reversed(rows)]


def _entry(row: RowMapping) -> AuditEntry:
    return AuditEntry(
        at=row["at"],
        subject=row["subject"],
        tenant=row["tenant"],
        method=row["method"],
        route=row["route"],
        path=row["path"],
        thread_id=row["thread_id"],
        status=row["status"],
    )


__all__ = ["AuditEntry", "AuditLog"]
