"""Alembic environment: runs migrations on the connection `migrate.upgrade` passes in."""

from __future__ import annotations

from alembic import context

from weft.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "run store migrations through store.migrate.upgrade, which passes an open connection"
    )

context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
