"""Secrets every `weft serve` replica on the store shares: the key its page tokens are
sealed with (api/thread_routes.py), so a token one replica gave is good at any other and
after a restart.

A secret is made on first use: random bytes inserted only if its name is absent, then
read back, so replicas starting at once all read the one whichever inserted first. It is
never changed and holds no thread data. It is kept as is, not sealed with the store's
keyring: it only proves a page token came from weft for its query, and whoever reads
the store already reads more than a forged token could list.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime

from sqlalchemy import Select, select

from weft.store.database import Database
from weft.store.tables import serve_secrets

SECRET_BYTES = 32


class ServeSecrets:
    """The `serve_secrets` table: one secret per name, made once."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def get(self, name: str) -> bytes:
        """The secret `name`, made now if no replica made it before."""
        with self._db.read() as connection:
            found = connection.execute(self._select(name)).scalar()
        if found is not None:
            return bytes(found)
        insert = self._db.insert_ignoring_duplicates(serve_secrets, ["name"]).values(
            name=name, secret=secrets.token_bytes(SECRET_BYTES), created_at=datetime.now(UTC)
        )

        def write() -> bytes:
            with self._db.write() as connection:
                connection.execute(insert)
                # Ours, or the one another replica inserted first: the same for everyone.
                return bytes(connection.execute(self._select(name)).scalar_one())

        return self._db.retrying(write)

    @staticmethod
    def _select(name: str) -> Select[bytes]:
        return select(serve_secrets.c.secret).where(serve_secrets.c.name == name)


__all__ = ["SECRET_BYTES", "ServeSecrets"]
