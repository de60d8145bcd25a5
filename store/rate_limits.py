"""Rate limits shared by every worker on the store: a reservation ledger per limit key.

A key (normally a provider's name) has one row, `rate_limit_keys`, holding when a
provider's Retry-After lets it be called again, and one row per grant in
`rate_limit_grants`: when the request may start and the tokens it counts. A reservation,
of one key or several at once (`reserve_all`: a request's API key and its tenant), holds
its keys' rows (PostgreSQL locks them, in the order given; SQLite's `BEGIN IMMEDIATE`
already admits one writer), reads their grants, places each new grant with
`rate_limit_window.earliest_start`, and inserts them while dropping grants that left the
window, all in one transaction of a read and a write, whatever the number of keys
(PostgreSQL locks in a statement of its own before the read; SQLite drops grants in one
of its own: tests/test_request_limit_statements.py). Times are the database's clock on PostgreSQL, so
workers on machines whose clocks differ still agree; SQLite is one machine's file, and its
clock is that machine's.
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import (
    BigInteger,
    Column,
    CompoundSelect,
    Connection,
    Float,
    Index,
    Select,
    String,
    Table,
    and_,
    delete,
    func,
    null,
    or_,
    select,
    union_all,
    update,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import ReturningInsert

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
                return self._take(connection, [(key, limit)], tokens, max_delay)[0]

        return self._db.retrying(write)

    def reserve_all(
        self, places: Sequence[tuple[str, WindowLimit]], *, max_delay: float
    ) -> NoPlace | None:
        """A place for one request of no tokens in every `(key, limit)` window, in one
        transaction: all of them (None), or none, and the first key that had no place
        within `max_delay`. Keys are locked in the order given: callers give them in one
        order (narrowest first)."""

        def write() -> NoPlace | None:
            with self._db.write() as connection:
                taken = self._take(connection, places, 0, max_delay)
            for (key, _), reservation in zip(places, taken, strict=False):
                if reservation.grant_id is None:
                    return NoPlace(key, reservation.delay_seconds)
            return None

        return self._db.retrying(write)

    def _take(
        self,
        connection: Connection,
        places: Sequence[tuple[str, WindowLimit]],
        tokens: int,
        max_delay: float | None,
    ) -> list[Reservation]:
        """Place one request of `tokens` in each `(key, limit)` window, in order, inside the
        caller's transaction: the reservations up to the first with no place within
        `max_delay`, which ends them and writes nothing. One read of every key's state
        (`_read`) and one write of the grants (`_write_grants`)."""
        keys = list(dict.fromkeys(key for key, _ in places))
        if not keys:
            return []
        now, blocked, held = self._read(connection, keys)
        taken: list[Reservation] = []
        new: list[dict[str, object]] = []
        cutoffs: dict[str, float] = {}
        for key, limit in places:
            grants = held[key]
            start = earliest_start(
                limit, grants, now=now, blocked_until=blocked.get(key, 0.0), tokens=tokens
            )
            delay = start - now
            if max_delay is not None and delay > max_delay:
                taken.append(Reservation(None, delay))
                return taken
            grant = Grant(start, limit.counted_tokens(tokens))
            grants.append(grant)  # a later place on the same key counts it
            grant_id = uuid.uuid4().hex
            new.append(
                {"grant_id": grant_id, "limit_key": key, "starts_at": start, "tokens": grant.tokens}
            )
            taken.append(Reservation(grant_id, delay))
            # Grants that left every window asked of the key go (the widest keeps its own).
            cutoffs[key] = min(cutoffs.get(key, math.inf), now - limit.hold_seconds)
        left = {key: cut for key, cut in cutoffs.items() if held[key] and held[key][0].start <= cut}
        self._write_grants(connection, new, left)
        return taken

    def _read(
        self, connection: Connection, keys: Sequence[str]
    ) -> tuple[float, dict[str, float], dict[str, list[Grant]]]:
        """Now, the keys' `blocked_until` and their grants in start order, every key held
        until the transaction ends.

        PostgreSQL locks the keys' rows in one statement and reads their grants in a second:
        a statement sees what was committed when it began, so grants read by the statement
        that waited for a key's lock would miss those its holder had just placed. SQLite's
        BEGIN IMMEDIATE holds every key already: one statement reads both.
        """
        if self._db.postgres:
            locked = connection.execute(self._locking(keys)).all()
            blocked = {key: float(until) for key, until, _ in locked}
            now = max(float(at) for _, _, at in locked)  # taken once the last lock was held
            query: _Rows = _grants_of(keys).order_by(rate_limit_grants.c.starts_at)
        else:
            now, blocked = time.time(), {}
            both = union_all(_blocks_of(keys), _grants_of(keys))
            query = both.order_by(both.selected_columns.starts_at)
        held: dict[str, list[Grant]] = {key: [] for key in keys}
        for key, at, tokens in connection.execute(query):
            if tokens is None:  # the key's own row: when it may be called again
                blocked[key] = float(at)
            else:
                held[key].append(Grant(float(at), int(tokens)))
        return now, blocked, held

    def _locking(self, keys: Sequence[str]) -> ReturningInsert[str, float, float]:
        """Creates the keys' rows if need be and locks them, in the order given (a no-op
        update locks a row as `FOR UPDATE` does); returns each key's `blocked_until` and
        the database's clock after its lock."""
        statement = postgresql.insert(rate_limit_keys).values(
            [{"limit_key": key, "blocked_until": 0.0} for key in keys]
        )
        return statement.on_conflict_do_update(
            index_elements=["limit_key"],
            set_={"blocked_until": rate_limit_keys.c.blocked_until},
        ).returning(
            rate_limit_keys.c.limit_key,
            rate_limit_keys.c.blocked_until,
            func.extract("epoch", func.clock_timestamp()),
        )

    def _write_grants(
        self, connection: Connection, grants: list[dict[str, object]], left: dict[str, float]
    ) -> None:
        """Insert the new grants and drop those that left their key's windows (`left`: the
        cutoff of each key that has some): one statement on PostgreSQL, two on SQLite
        (which runs no DELETE inside an INSERT)."""
        insert = rate_limit_grants.insert().values(grants)
        if left:
            drop = delete(rate_limit_grants).where(
                or_(
                    *(
                        and_(
                            rate_limit_grants.c.limit_key == key,
                            rate_limit_grants.c.starts_at <= cutoff,
                        )
                        for key, cutoff in left.items()
                    )
                )
            )
            if self._db.postgres:
                insert = insert.add_cte(drop.cte("dropped"))
            else:
                connection.execute(drop)
        connection.execute(insert)

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


# A read of the keys' grants (and on SQLite their rows): key, start or `blocked_until`, tokens.
_Rows = Select[str, float, int | None] | CompoundSelect[str, float, int | None]


def _grants_of(keys: Sequence[str]) -> Select[str, float, int | None]:
    """The keys' grants: key, start, tokens."""
    return select(
        rate_limit_grants.c.limit_key, rate_limit_grants.c.starts_at, rate_limit_grants.c.tokens
    ).where(rate_limit_grants.c.limit_key.in_(keys))


def _blocks_of(keys: Sequence[str]) -> Select[str, float, int | None]:
    """The keys' rows in the shape of `_grants_of`: key, `blocked_until`, no tokens."""
    return select(
        rate_limit_keys.c.limit_key,
        rate_limit_keys.c.blocked_until.label("starts_at"),
        null().label("tokens"),
    ).where(rate_limit_keys.c.limit_key.in_(keys))
