"""Budget ledger rows, and the projection of `set_budget`'s `limit.changed` into them.

Kept apart from `budgets.py` because `insert_events` calls the projection (as it calls
`project_subagents`), and `budgets.py` calls `insert_events`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Row, bindparam, select, update

from weft.contract.budget import LIMIT_NAMES, Budget, BudgetSpend, BudgetState
from weft.contract.events import Event
from weft.store.database import Database
from weft.store.tables import budgets

# `limit.changed` events with this reason carry new limits for the ledger.
LIMIT_CHANGED = "limit.changed"
SET_BUDGET_REASON = "set_budget"


def project_budgets(database: Database, connection: Connection, stored: Sequence[Event]) -> None:
    """Apply newly stored `limit.changed` events of `set_budget` to their ledgers (in the
    transaction that stores them): new limits, unblocked, and `quota.low` again for each
    limit whose cap changed."""
    now = datetime.now(UTC)
    for event in stored:
        payload = event.payload or {}
        if event.type != LIMIT_CHANGED or payload.get("reason") != SET_BUDGET_REASON:
            continue
        root = str(payload["rootThreadId"])
        limits = Budget.model_validate(payload.get("limits") or {})
        connection.execute(
            database.insert_ignoring_duplicates(budgets, ["root_thread_id"]).values(
                **new_ledger_row(root, limits, now)
            )
        )
        row = ledger_row(connection, root)
        assert row is not None  # inserted above, or already there
        before = Budget.model_validate(row.limits)
        kept = [n for n in row.low_emitted if before.limit(n) == limits.limit(n)]
        connection.execute(
            update(budgets)
            .where(budgets.c.root_thread_id == root)
            .values(limits=limits_json(limits), blocked=None, low_emitted=kept, updated_at=now)
        )


# Every step reads it: built once, so SQLAlchemy keeps its cache key.
_LEDGER = select(budgets).where(budgets.c.root_thread_id == bindparam("root"))


def ledger_row(connection: Connection, root_thread_id: str) -> Row[Any] | None:
    return connection.execute(_LEDGER, {"root": root_thread_id}).first()


def state_of(row: Row[Any], now: datetime) -> BudgetState:
    return BudgetState(
        root_thread_id=row.root_thread_id,
        limits=Budget.model_validate(row.limits),
        spent=BudgetSpend(
            tokens=row.tokens,
            cost_usd=row.cost_usd,
            model_calls=row.model_calls,
            wall_seconds=max((now - row.started_at).total_seconds(), 0.0),
            cost_unknown=row.cost_unknown,
        ),
        blocked=row.blocked if row.blocked in LIMIT_NAMES else None,
    )


def new_ledger_row(root_thread_id: str, limits: Budget, now: datetime) -> dict[str, Any]:
    return {
        "root_thread_id": root_thread_id,
        "limits": limits_json(limits),
        "started_at": now,
        "tokens": 0,
        "cost_usd": 0.0,
        "model_calls": 0,
        "cost_unknown": False,
        "low_emitted": [],
        "blocked": None,
        "updated_at": now,
    }


def limits_json(limits: Budget) -> dict[str, Any]:
    return limits.model_dump(mode="json", by_alias=True, exclude_none=True)
