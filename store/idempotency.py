"""Idempotency keys of the HTTP API: a POST retried with the same key acts once.

The first request with a key claims it (a `pending` row); when it has its final reply, the
reply is recorded (`done`) and every retry with the same key and the same request gets it
back instead of acting again. A claim is released (the row deleted) when the action failed
in a way that may be retried. Rows expire after `ttl` (24 h) and are purged lazily, by the
claims themselves, at most once per `purge_interval`.

A pending claim older than `lease` is deemed abandoned (its server died mid-request) and
the next retry takes it over; `claim_id` tells the attempts apart, so the abandoned one
cannot record or release over the one that took over.

Exactly one of several concurrent claims of a new key wins on both backends: the INSERT
skips an existing key (PostgreSQL makes the second inserter wait for the first to commit),
and the loser then reads the winner's row.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, RowMapping, delete, select, update

from weft.store.database import Database
from weft.store.tables import idempotency_keys

# Longest key the table holds (and the API accepts).
MAX_KEY_CHARS = 255
DEFAULT_TTL = timedelta(hours=24)
# Longer than the longest request the API serves (a turn waited for up to 300 s).
DEFAULT_LEASE = timedelta(minutes=10)
DEFAULT_PURGE_INTERVAL = timedelta(minutes=5)


@dataclass(frozen=True)
class Claimed:
    """This request holds the key: act, then `record` (or `release`) with `claim_id`."""

    claim_id: str
    # True when an abandoned pending claim was taken over: the earlier attempt may have
    # acted already, so the action must tolerate running again (derived ids).
    took_over: bool = False


@dataclass(frozen=True)
class Recorded:
    """The key's request was answered before: reply with this again."""

    status: int
    response: Any


@dataclass(frozen=True)
class InProgress:
    """Another request with this key has not finished yet."""

    since: datetime


@dataclass(frozen=True)
class Mismatch:
    """The key was used for a different request (`scope` says which route)."""

    scope: str


Claim = Claimed | Recorded | InProgress | Mismatch


class IdempotencyKeys:
    """The `idempotency_keys` table: claim, record, release and purge keys."""

    def __init__(
        self,
        database: Database,
        *,
        ttl: timedelta = DEFAULT_TTL,
        lease: timedelta = DEFAULT_LEASE,
        purge_interval: timedelta = DEFAULT_PURGE_INTERVAL,
    ) -> None:
        self._db = database
        self.ttl = ttl
        self.lease = lease
        self._purge_interval = purge_interval
        self._purge_lock = threading.Lock()
        self._last_purge: datetime | None = None

    def claim(
        self, key: str, scope: str, fingerprint: str, *, now: datetime | None = None
    ) -> Claim:
        """Claim `key` for the request `fingerprint` (of `scope`), or say why not."""
        now = now or datetime.now(UTC)
        self._purge_if_due(now)
        claim_id = uuid.uuid4().hex
        fresh = {
            "scope": scope,
            "fingerprint": fingerprint,
            "claim_id": claim_id,
            "state": "pending",
            "status": None,
            "response": None,
            "created_at": now,
            "updated_at": now,
        }
        # RETURNING says whether the row went in (rowcount of an INSERT is unreliable).
        insert = (
            self._db.insert_ignoring_duplicates(idempotency_keys, ["key"])
            .values(key=key, **fresh)
            .returning(idempotency_keys.c.key)
        )
        with self._db.write() as connection:
            if connection.execute(insert).scalar() is not None:
                return Claimed(claim_id)
            row = _select(connection, key)
            if row is None or row["created_at"] <= now - self.ttl:
                # Expired (or purged just now): the key is free again, for any request.
                _replace(connection, key, fresh)
                return Claimed(claim_id)
            if row["fingerprint"] != fingerprint:
                return Mismatch(str(row["scope"]))
            if row["state"] == "done":
                return Recorded(int(row["status"]), row["response"])
            if row["updated_at"] <= now - self.lease:
                connection.execute(
                    update(idempotency_keys)
                    .where(idempotency_keys.c.key == key)
                    .values(claim_id=claim_id, updated_at=now)
                )
                return Claimed(claim_id, took_over=True)
            return InProgress(row["updated_at"])

    def record(self, key: str, claim_id: str, status: int, response: Any) -> bool:
        """Keep the final reply of the claim; False when the claim is no longer held."""
        statement = (
            update(idempotency_keys)
            .where(
                idempotency_keys.c.key == key,
                idempotency_keys.c.claim_id == claim_id,
                idempotency_keys.c.state == "pending",
            )
            .values(state="done", status=status, response=response, updated_at=datetime.now(UTC))
        )
        with self._db.write() as connection:
            return connection.execute(statement).rowcount == 1

    def release(self, key: str, claim_id: str) -> bool:
        """Forget a pending claim, so the request may be retried; False if not held."""
        statement = delete(idempotency_keys).where(
            idempotency_keys.c.key == key,
            idempotency_keys.c.claim_id == claim_id,
            idempotency_keys.c.state == "pending",
        )
        with self._db.write() as connection:
            return connection.execute(statement).rowcount == 1

    def purge_expired(self, *, now: datetime | None = None) -> int:
        """Delete the keys older than the ttl; returns how many."""
        cutoff = (now or datetime.now(UTC)) - self.ttl
        statement = delete(idempotency_keys).where(idempotency_keys.c.created_at <= cutoff)
        with self._db.write() as connection:
            return int(connection.execute(statement).rowcount)

    def _purge_if_due(self, now: datetime) -> None:
        with self._purge_lock:
            due = self._last_purge is None or now - self._last_purge >= self._purge_interval
            if due:
                self._last_purge = now
        if due:
            self.purge_expired(now=now)


def _select(connection: Connection, key: str) -> RowMapping | None:
    query = select(idempotency_keys).where(idempotency_keys.c.key == key).with_for_update()
    return connection.execute(query).mappings().first()


def _replace(connection: Connection, key: str, values: dict[str, Any]) -> None:
    connection.execute(delete(idempotency_keys).where(idempotency_keys.c.key == key))
    connection.execute(idempotency_keys.insert().values(key=key, **values))


__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_TTL",
    "MAX_KEY_CHARS",
    "Claim",
    "Claimed",
    "IdempotencyKeys",
    "InProgress",
    "Mismatch",
    "Recorded",
]
