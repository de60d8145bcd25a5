"""Rate limits shared by every worker on the store: a reservation ledger per limit key.

A key (normally a provider's name) has one row, `rate_limit_keys`, holding when a
provider's Retry-After lets it be called again, and one row per grant in
`rate_limit_grants`: when the request may start and the tokens it counts. A reservation
locks the key's row (`SELECT … FOR UPDATE` on PostgreSQL; SQLite's `BEGIN IMMEDIATE`
already admits one writer), drops grants that left the window, places the new grant with
`rate_limit_window.earliest_start` and inserts it, all in one transaction. Times are the
database's clock on PostgreSQL, so workers on machines whose clocks differ still agree;
SQLite is one machine's file, and its clock is that machine's.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    String,
    Table,
    delete,
    select,
    update,
)

from weft.store.database import Database
from weft.store.rate_limit_window import Grant, WindowLimit, earliest_start
from weft.store.tables import ID_LENGTH, metadata

# One row per limit key: until when (epoch seconds) a provider asked not to be called.
rate_limit_keys = Table(
    "rate_limit_keys",
    metadata,
    Column("limit_key", String(ID_LENGTH), primary_key=True),
    Column("blocked_until", Float, nullable=False),
)

# One row per request granted (or placed in the future): its start and counted tokens,
# settled to the provider's usage once the reply came.
rate_limit_grants = Table(
    "rate_limit_grants",
    metadata,
    Column("grant_id", String(ID_LENGTH), primary_key=True),
    Column("limit_key", String(ID_LENGTH), nullable=False),
    Column("starts_at", Float, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Index("ix_rate_limit_grants_key_start", "limit_key", "starts_at"),
)


@dataclass(frozen=True)
class Reservation:
    """A place in a key's window: start after `delay_seconds`. `grant_id` is None when the
    delay was over what the caller accepts, and nothing was reserved."""

    grant_id: str | None
    delay_seconds: float


@dataclass(frozen=True)
class NoPlace:
    """`reserve_all`'s refusal: the first key with no place soon enough, and its wait."""

    key: str
    delay_seconds: float


class _Refused(Exception):
    """Rolls back `reserve_all`'s transaction when a key had no place."""

    def __init__(self, refusal: NoPlace) -> None:
        super().__init__(refusal.key)
        self.refusal = refusal


class RateLimits:
    """Reservations against limit keys, shared by every process on the database."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def reserve(
        self, key: str, limit: WindowLimit, tokens: int, *, max_delay: float | None = None
    ) -> Reservation:
        """Reserve the earliest start for one request of `tokens` under `limit` on `key`;
        with `max_delay`, reserve nothing when that start is further away."""

        def write() -> Reservation:
            with self._db.write() as connection:
                return self._place(connection, key, limit, tokens, max_delay)

        return self._db.retrying(write)

    def reserve_all(
        self, places: Sequence[tuple[str, WindowLimit]], *, max_delay: float
    ) -> NoPlace | None:
        """A place for one request of no tokens in every `(key, limit)` window, in one
        transaction: all of them (None), or none, and the first key that had no place
        within `max_delay`. Keys are locked in the order given: callers give them in one
        order (narrowest first)."""

        def write() -> NoPlace | None:
            try:
                with self._db.write() as connection:
                    for key, limit in places:
                        placed = self._place(connection, key, limit, 0, max_delay)
                        if placed.grant_id is None:
                            # Rolls back the places taken before this one.
                            raise _Refused(NoPlace(key, placed.delay_seconds))
            except _Refused as refused:
                return refused.refusal
            return None

        return self._db.retrying(write)

    def _place(
        self,
        connection: Connection,
        key: str,
        limit: WindowLimit,
        tokens: int,
        max_delay: float | None,
    ) -> Reservation:
        """Place one request on `key` inside the caller's transaction (see `reserve`)."""
        blocked_until = self._lock_key(connection, key)
        now = self._now(connection)
        connection.execute(
            delete(rate_limit_grants).where(
                rate_limit_grants.c.limit_key == key,
                rate_limit_grants.c.starts_at <= now - limit.hold_seconds,
            )
        )
        rows = connection.execute(
            select(rate_limit_grants.c.starts_at, rate_limit_grants.c.tokens)
            .where(rate_limit_grants.c.limit_key == key)
            .order_by(rate_limit_grants.c.starts_at)
        ).all()
        grants = [Grant(start, count) for start, count in rows]
        start = earliest_start(limit, grants, now=now, blocked_until=blocked_until, tokens=tokens)
        delay = start - now
        if max_delay is not None and delay > max_delay:
            return Reservation(None, delay)
        grant_id = uuid.uuid4().hex
        connection.execute(
            rate_limit_grants.insert().values(
                grant_id=grant_id,
                limit_key=key,
                starts_at=start,
                tokens=limit.counted_tokens(tokens),
            )
        )
        return Reservation(grant_id, delay)

    def settle(self, grant_id: str, tokens: int) -> None:
        """Count what the request really used instead of its estimate."""
        with self._db.write() as connection:
            connection.execute(
                update(rate_limit_grants)
                .where(rate_limit_grants.c.grant_id == grant_id)
                .values(tokens=max(tokens, 0))
            )

    def release(self, grant_id: str) -> None:
        """Give a reservation back: the request will not be sent at that time."""
        with self._db.write() as connection:
            connection.execute(
                delete(rate_limit_grants).where(rate_limit_grants.c.grant_id == grant_id)
            )

    def block(self, key: str, seconds: float) -> None:
        """Nothing starts on `key` for `seconds` from now (a provider's Retry-After);
        a longer block already in force stays."""

        def write() -> None:
            with self._db.write() as connection:
                blocked_until = self._lock_key(connection, key)
                until = self._now(connection) + max(seconds, 0.0)
                if until > blocked_until:
                    connection.execute(
                        update(rate_limit_keys)
                        .where(rate_limit_keys.c.limit_key == key)
                        .values(blocked_until=until)
                    )

        self._db.retrying(write)

    def blocked_for(self, key: str) -> float:
        """Seconds from now until `key` may be called again (0 when it is not blocked)."""
        with self._db.read() as connection:
            blocked_until = connection.execute(
                select(rate_limit_keys.c.blocked_until).where(rate_limit_keys.c.limit_key == key)
            ).scalar()
            now = self._now(connection)
        return max((blocked_until or 0.0) - now, 0.0)

    def _lock_key(self, connection: Connection, key: str) -> float:
        """Create the key's row if need be and hold it until the transaction ends; returns
        its `blocked_until`."""
        connection.execute(
            self._db.insert(rate_limit_keys)
            .values(limit_key=key, blocked_until=0.0)
            .on_conflict_do_nothing(index_elements=["limit_key"])
        )
        query = select(rate_limit_keys.c.blocked_until).where(rate_limit_keys.c.limit_key == key)
        if self._db.postgres:
            query = query.with_for_update()
        return float(connection.execute(query).scalar_one())

    def _now(self, connection: Connection) -> float:
        """Epoch seconds by the database's clock (PostgreSQL) or this machine's (SQLite)."""
        if self._db.postgres:
            return float(
                connection.exec_driver_sql(
                    "SELECT EXTRACT(EPOCH FROM clock_timestamp())"
                ).scalar_one()
            )
        return time.time()
