"""Definitions versions in the store: each digest once, naming the snapshot with its content."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select

from weft.store.database import Database
from weft.store.tables import definitions_versions


class DefinitionsVersions:
    """Which snapshot holds the definitions of each digest (`definitions/digest.py`)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def put(self, digest: str, agent: str, snapshot_id: str) -> None:
        """Record a version; recording the same digest again changes nothing."""
        statement = self._db.insert_ignoring_duplicates(definitions_versions, ["digest"]).values(
            digest=digest, agent=agent, snapshot_id=snapshot_id, created_at=datetime.now(UTC)
        )
        with self._db.write() as connection:
            connection.execute(statement)

    def snapshot_id(self, digest: str) -> str | None:
        """The snapshot that holds the definitions of `digest`, or None when not recorded."""
        query = select(definitions_versions.c.snapshot_id).where(
            definitions_versions.c.digest == digest
        )
        with self._db.read() as connection:
            found: str | None = connection.scalar(query)
        return found
