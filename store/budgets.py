"""Budget ledgers: one per tree of threads, keyed by its root thread (docs/budgets.md).

The ledger is written only inside transactions that already store the fact behind the
change: `model.call` checks it in the write that records `model.requested` and charges it
in the write that records `cost.recorded`, and a `limit.changed` from `set_budget` is
projected into it by `insert_events` (`budget_rows.py`), like `subagent.*` events into their rows. A charge
counts only when its `cost.recorded` event is newly stored, so a retried write never
counts twice. Every charge is one atomic `UPDATE … SET x = x + …`, so concurrent charges
from the threads of one tree add up on both backends. The tenant's quota rides on the same
statements: read joined to the ledger's row, and charged, by its key, only when that read
found a row (`Charge.quota_tenant`), so a tenant without a quota costs no statement.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Any

from sqlalchemy import BigInteger, Boolean, Connection, Float, Row, bindparam, update

from weft.contract.budget import Budget, BudgetLimitName, BudgetState
from weft.contract.events import Event
from weft.contract.messages import Message
from weft.store.budget_rows import ledger_row, new_ledger_row, state_of
from weft.store.database import Database
from weft.store.events import events_by_thread, insert_events
from weft.store.messages import insert_messages, message_rows
from weft.store.outcome_fence import any_closed, locked
from weft.store.tables import budgets
from weft.store.tenant_quotas import TenantQuota, charge_quota, charge_tenant, ledger_and_quota

# Makes the ledger's own events (quota.low, limit.changed, quota.blocked) as facts of the
# write that caused them: (id suffix, type, payload) -> Event.
EventMaker = Callable[[str, str, dict[str, Any]], Event]


class Unread(Enum):
    """A charge whose call did not read its tenant's quota row with its ledger."""

    QUOTA = "quota"


@dataclass(frozen=True)
class Charge:
    """What one model attempt spent, charged when `event_id` (its cost.recorded) is new."""

    root_thread_id: str
    event_id: str
    tokens: int
    cost_usd: float | None
    # The tenant whose quota row the call's ledger read found (`ledger_and_quota`): charged
    # by its key. None: the read found no row, so no tenant is charged and no statement
    # runs for it. Unread: the charge looks the root's tenant up itself.
    quota_tenant: str | None | Unread = Unread.QUOTA


@dataclass(frozen=True)
class Checked:
    """A ledger read before a model call: its state, the limit that refuses the call, and
    the tenant's quota read with it (None: the tenant has none)."""

    state: BudgetState | None
    refused_by: BudgetLimitName | None = None
    quota: TenantQuota | None = None

    @property
    def tenant_spent(self) -> bool:
        """Whether the tenant's quota refused the call (checked before the ledger's)."""
        return self.quota is not None and self.quota.spent_limit() is not None


class Budgets:
    """Ledgers of limits and spend, idempotent per charge, on SQLite and PostgreSQL."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def open(
        self, root_thread_id: str, limits: Budget, *, now: datetime, events: Sequence[Event] = ()
    ) -> BudgetState:
        """Open the tree's ledger (kept as it is when already open) with `events`, in one
        transaction; the ledger as stored."""

        def once(connection: Connection) -> BudgetState:
            connection.execute(
                self._db.insert_ignoring_duplicates(budgets, ["root_thread_id"]).values(
                    **new_ledger_row(root_thread_id, limits, now)
                )
            )
            insert_events(self._db, connection, events_by_thread(events))
            row = ledger_row(connection, root_thread_id)
            assert row is not None  # inserted above, or already there
            return state_of(row, now)

        return self._db.write_retrying(once)

    def get(self, root_thread_id: str, *, now: datetime) -> BudgetState | None:
        """The ledger as stored, wall time measured at `now`; None when none is open."""
        with self._db.read() as connection:
            row = ledger_row(connection, root_thread_id)
        return None if row is None else state_of(row, now)

    def check(self, root_thread_id: str | None, thread_id: str, *, now: datetime) -> Checked:
        """The ledger of `root_thread_id` with the limit that would refuse a call, and the
        quota of its tenant (of `thread_id`'s without a ledger): one statement, nothing
        written (`record_checked` refuses in its write)."""
        with self._db.read() as connection:
            read = ledger_and_quota(connection, root_thread_id, thread_id)
        state = None if read.ledger is None else state_of(read.ledger, now)
        return Checked(state, None if state is None else state.spent_limit(), read.quota)

    def record_checked(
        self,
        root_thread_id: str,
        messages: Sequence[Message],
        events: Sequence[Event],
        requested: Event,
        *,
        now: datetime,
        make_event: EventMaker,
    ) -> Checked:
        """Store a model step's messages and events, and `requested` when the tenant's
        quota and the ledger allow the call; otherwise `quota.blocked` instead (a spent
        tenant quota first: `scope: "tenant"`), and the ledger marks its limit.

        One transaction: the ledger read, the tenant's quota joined to it, rides on the
        write the step makes anyway.
        """
        rows = message_rows(messages)

        def once(connection: Connection) -> Checked:
            read = ledger_and_quota(connection, root_thread_id, root_thread_id)
            state = None if read.ledger is None else state_of(read.ledger, now)
            refused_by = None if state is None else state.spent_limit()
            extra = [requested]
            tenant_blocked = (
                None if read.quota is None else read.quota.blocked_payload(root_thread_id)
            )
            if tenant_blocked is not None:
                extra = [make_event("blocked", "quota.blocked", tenant_blocked)]
                state, refused_by = None, None  # the ledger was not what refused the call
            elif state is not None and refused_by is not None:
                extra = [make_event("blocked", "quota.blocked", _quota(state, refused_by))]
                connection.execute(
                    update(budgets)
                    .where(budgets.c.root_thread_id == root_thread_id)
                    .values(blocked=refused_by, updated_at=now)
                )
                state = state.model_copy(update={"blocked": refused_by})
            if rows:
                insert_messages(self._db, connection, rows)
            insert_events(self._db, connection, events_by_thread([*events, *extra]))
            return Checked(state, refused_by, read.quota)

        return self._db.write_retrying(once)

    def record_charged(
        self,
        messages: Sequence[Message],
        events: Sequence[Event],
        charge: Charge | None,
        *,
        now: datetime,
        make_event: EventMaker,
        unless_closed: bool = False,
    ) -> tuple[list[Event], BudgetState | None]:
        """Store an attempt's messages and events and, when its cost.recorded event is
        newly stored, charge the ledger and announce the limits it brought past 80 %.

        With `unless_closed` (a model call's final write), a thread that closed while the
        call ran gets only the cost: its reply is no fact of the thread any more, but the
        money was spent and the ledger counts it (fenced in this transaction, under the
        thread's lock: store/outcome_fence.py).
        Returns the newly stored events and the ledger after the charge (None without one).
        """
        rows = message_rows(messages)

        def once(connection: Connection) -> tuple[list[Event], BudgetState | None]:
            kept_rows, kept = rows, list(events)
            if unless_closed:
                thread_ids = {r["thread_id"] for r in rows} | {e.thread_id for e in kept}
                locked(self._db, connection, thread_ids)
                if any_closed(connection, thread_ids):
                    kept_rows = []
                    kept = [e for e in kept if charge and e.event_id == charge.event_id]
            if kept_rows:
                insert_messages(self._db, connection, kept_rows)
            stored = insert_events(self._db, connection, events_by_thread(kept))
            if charge is None:
                return stored, None
            charged = any(e.event_id == charge.event_id for e in stored)
            if charged:  # the tenant's budget counts every charge of its trees too
                _charge_tenant(connection, charge)
            # A charge returns the ledger it leaves; a retried attempt's only reads it.
            row = (
                _add(connection, charge, now)
                if charged
                else ledger_row(connection, charge.root_thread_id)
            )
            if row is None:
                return stored, None
            state = state_of(row, now)
            announced = [n for n in state.low_limits() if n not in row.low_emitted]
            if announced:
                connection.execute(
                    update(budgets)
                    .where(budgets.c.root_thread_id == charge.root_thread_id)
                    .values(low_emitted=[*row.low_emitted, *announced])
                )
                lows = _low_events(state, announced, make_event)
                stored += insert_events(self._db, connection, events_by_thread(lows))
            return stored, state

        return self._db.write_retrying(once)


# Every model call charges the ledger: built once, so SQLAlchemy keeps its cache key.
_CHARGE = (
    update(budgets)
    .where(budgets.c.root_thread_id == bindparam("root"))
    .values(
        tokens=budgets.c.tokens + bindparam("add_tokens", type_=BigInteger),
        cost_usd=budgets.c.cost_usd + bindparam("add_cost", type_=Float),
        model_calls=budgets.c.model_calls + 1,
        cost_unknown=budgets.c.cost_unknown | bindparam("unknown", type_=Boolean),
        updated_at=bindparam("now", type_=budgets.c.updated_at.type),
    )
    .returning(*budgets.c)
)


def _add(connection: Connection, charge: Charge, now: datetime) -> Row[Any] | None:
    """Charge the ledger and return it as charged (None when the tree has no ledger).

    One statement adds to the stored values, so concurrent charges never lose one.
    """
    return connection.execute(
        _CHARGE,
        {
            "root": charge.root_thread_id,
            "add_tokens": charge.tokens,
            "add_cost": charge.cost_usd or 0.0,
            "unknown": charge.cost_usd is None,
            "now": now,
        },
    ).first()


def _charge_tenant(connection: Connection, charge: Charge) -> None:
    """Add the charge to its tenant's quota row: none when the call's read found none."""
    cost = charge.cost_usd or 0.0
    if isinstance(charge.quota_tenant, Unread):
        charge_tenant(connection, charge.root_thread_id, charge.tokens, cost)
    elif charge.quota_tenant is not None:
        charge_quota(connection, charge.quota_tenant, charge.tokens, cost)


def _low_events(
    state: BudgetState, names: list[BudgetLimitName], make_event: EventMaker
) -> list[Event]:
    events: list[Event] = []
    for name in names:
        quota = _quota(state, name)
        events.append(make_event(f"low.{name}", "quota.low", quota))
        events.append(
            make_event(f"low.{name}.limit", "limit.changed", {**quota, "reason": "quota_low"})
        )
    return events


def _quota(state: BudgetState, name: BudgetLimitName) -> dict[str, Any]:
    return {
        "rootThreadId": state.root_thread_id,
        "limit": name,
        "spent": state.spent.value(name),
        "limitValue": state.limits.limit(name),
    }
