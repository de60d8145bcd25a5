"""API keys of the HTTP API: each belongs to a tenant and carries scopes (docs/tenants.md).

A key is shown once, at creation, as `weft.<key id>.<secret>`; the store keeps only
sha256 of the key id and the secret. The secret is 256 random bits, so a plain hash is
enough (no password stretching is needed against guessing), and the key id in the hash
binds it to its row. Presented keys are compared in constant time. A key is refused
once it has expired or been revoked; nothing is cached, so a revocation holds from the
very next request.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy import RowMapping, select, update

from weft.contract.tenants import SCOPES, Scope, check_tenant
from weft.store.database import Database
from weft.store.tables import api_keys

KEY_PREFIX = "weft"
# `weft.k<16 hex>.<secret>`: the id is readable in logs and lists; the secret never is.
_ID_HEX = 16
_SECRET_BYTES = 32

KeyState = Literal["active", "expired", "revoked"]


@dataclass(frozen=True)
class ApiKey:
    """A key as stored: everything but its secret."""

    key_id: str
    tenant: str
    scopes: tuple[Scope, ...]
    created_at: datetime
    expires_at: datetime | None = None
    revoked_at: datetime | None = None
    description: str | None = None

    def state(self, now: datetime) -> KeyState:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"


@dataclass(frozen=True)
class CreatedKey:
    """A new key and its secret, which is shown once and stored nowhere."""

    key: ApiKey
    secret: str


@dataclass(frozen=True)
class KeyRefused:
    """Why a presented key does not authenticate: unknown (or a wrong secret), revoked,
    or expired."""

    reason: Literal["unknown", "revoked", "expired"]
    key_id: str | None = None


class UnknownKey(KeyError):
    """No key has this id."""


class ApiKeys:
    """The `api_keys` table."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def create(
        self,
        tenant: str,
        scopes: builtins.list[str],
        *,
        expires_at: datetime | None = None,
        description: str | None = None,
        now: datetime | None = None,
    ) -> CreatedKey:
        """A new key of `tenant` with `scopes`; ValueError naming a bad tenant or scope."""
        check_tenant(tenant)
        checked = _check_scopes(scopes)
        created_at = now or datetime.now(UTC)
        if expires_at is not None and expires_at.tzinfo is None:
            raise ValueError("expires_at: a timezone-aware time is needed")
        if expires_at is not None and expires_at <= created_at:
            raise ValueError("expires_at: the key would be expired already")
        key_id = "k" + secrets.token_hex(_ID_HEX // 2)
        secret = secrets.token_urlsafe(_SECRET_BYTES)
        with self._db.write() as connection:
            connection.execute(
                api_keys.insert().values(
                    key_id=key_id,
                    tenant=tenant,
                    scopes=list(checked),
                    secret_hash=_hash(key_id, secret),
                    description=description,
                    created_at=created_at,
                    expires_at=expires_at,
                )
            )
        key = ApiKey(
            key_id=key_id,
            tenant=tenant,
            scopes=checked,
            created_at=created_at,
            expires_at=expires_at,
            description=description,
        )
        return CreatedKey(key=key, secret=f"{KEY_PREFIX}.{key_id}.{secret}")

    def get(self, key_id: str) -> ApiKey | None:
        with self._db.read() as connection:
            row = (
                connection.execute(select(api_keys).where(api_keys.c.key_id == key_id))
                .mappings()
                .first()
            )
        return None if row is None else _key(row)

    def list(self, *, tenant: str | None = None) -> builtins.list[ApiKey]:
        """Every key (of `tenant`), oldest first; secrets are not stored, so never shown."""
        query = select(api_keys).order_by(api_keys.c.created_at, api_keys.c.key_id)
        if tenant is not None:
            query = query.where(api_keys.c.tenant == tenant)
        with self._db.read() as connection:
            return [_key(row) for row in connection.execute(query).mappings()]

    def revoke(self, key_id: str, *, now: datetime | None = None) -> ApiKey:
        """Revoke the key from its next request on; revoking twice keeps the first time.
        `UnknownKey` when no key has this id."""
        with self._db.write() as connection:
            connection.execute(
                update(api_keys)
                .where(api_keys.c.key_id == key_id, api_keys.c.revoked_at.is_(None))
                .values(revoked_at=now or datetime.now(UTC))
            )
        key = self.get(key_id)
        if key is None:
            raise UnknownKey(key_id)
        return key

    def authenticate(self, presented: str, *, now: datetime | None = None) -> ApiKey | KeyRefused:
        """The active key `presented` is, or why it is refused."""
        key_id, secret = parse_key(presented)
        if key_id is None or secret is None:
            return KeyRefused("unknown")
        with self._db.read() as connection:
            row = (
                connection.execute(select(api_keys).where(api_keys.c.key_id == key_id))
                .mappings()
                .first()
            )
        expected = row["secret_hash"] if row is not None else _hash("", "")
        # Hashed and compared even for an unknown id: the answer takes as long either way.
        matches = hmac.compare_digest(_hash(key_id, secret), expected)
        if row is None or not matches:
            return KeyRefused("unknown")
        key = _key(row)
        state = key.state(now or datetime.now(UTC))
        if state != "active":
            return KeyRefused(state, key_id)
        return key


def parse_key(presented: str) -> tuple[str | None, str | None]:
    """`weft.<key id>.<secret>` → (key id, secret); (None, None) for anything else."""
    prefix, _, rest = presented.partition(".")
    key_id, _, secret = rest.partition(".")
    if prefix != KEY_PREFIX or not secret or len(key_id) != _ID_HEX + 1 or key_id[0] != "k":
        return None, None
    if not all(c in "0123456789abcdef" for c in key_id[1:]):
        return None, None
    return key_id, secret


def _check_scopes(scopes: builtins.list[str]) -> tuple[Scope, ...]:
    checked: builtins.list[Scope] = []
    for name in scopes:
        scope = next((known for known in SCOPES if known == name), None)
        if scope is None:
            raise ValueError(f"scope {name!r} is unknown; known scopes: {', '.join(SCOPES)}")
        if scope not in checked:
            checked.append(scope)
    if not checked:
        raise ValueError(f"scopes: at least one is needed ({', '.join(SCOPES)})")
    return tuple(checked)


def _hash(key_id: str, secret: str) -> str:
    return hashlib.sha256(f"{key_id}\0{secret}".encode()).hexdigest()


def _key(row: RowMapping) -> ApiKey:
    return ApiKey(
        key_id=row["key_id"],
        tenant=row["tenant"],
        scopes=tuple(s for s in SCOPES if s in row["scopes"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        revoked_at=row["revoked_at"],
        description=row["description"],
    )


__all__ = [
    "KEY_PREFIX",
    "ApiKey",
    "ApiKeys",
    "CreatedKey",
    "KeyRefused",
    "UnknownKey",
    "parse_key",
]
