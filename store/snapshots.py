"""Definition snapshots in the store: content-addressed, written once, sealed when they carry env."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select

from weft.activities.crypto import Keyring
from weft.contract.thread_env import carries_env
from weft.store.database import Database
from weft.store.sealed import seal, unseal
from weft.store.tables import definitions_versions, snapshots


class Snapshots:
    """Definition snapshots by id (`contract.definitions.DefinitionSnapshot`, as JSON)."""

    def __init__(self, database: Database, keyring: Keyring | None) -> None:
        self._db = database
        self._keyring = keyring

    def put(
        self, snapshot_id: str, data: dict[str, Any], *, version: tuple[str, str] | None = None
    ) -> None:
        """Store a content-addressed snapshot; storing the same id again changes nothing.

        A snapshot whose definitions carry env is sealed when keys are configured.
        `version` (digest, agent) records the definitions version that names it in the same
        transaction (`store/definitions_versions.py`): one commit, and a version row never
        names a snapshot that is not stored.
        """
        if carries_env(data):
            data = seal(data, self._keyring, bound_to=_bound_to(snapshot_id))
        now = datetime.now(UTC)
        statements = [
            self._db.insert_ignoring_duplicates(snapshots, ["snapshot_id"]).values(
                snapshot_id=snapshot_id, data=data, created_at=now
            )
        ]
        if version is not None:
            digest, agent = version
            statements.append(
                self._db.insert_ignoring_duplicates(definitions_versions, ["digest"]).values(
                    digest=digest, agent=agent, snapshot_id=snapshot_id, created_at=now
                )
            )
        with self._db.write() as connection:
            for statement in statements:
                connection.execute(statement)

    def get(self, snapshot_id: str) -> dict[str, Any] | None:
        """The snapshot stored under `snapshot_id`, or None."""
        query = select(snapshots.c.data).where(snapshots.c.snapshot_id == snapshot_id)
        with self._db.read() as connection:
            data: dict[str, Any] | None = connection.scalar(query)
        if data is None:
            return None
        return unseal(data, self._keyring, bound_to=_bound_to(snapshot_id))


def _bound_to(snapshot_id: str) -> str:
    return f"snapshot {snapshot_id}"
