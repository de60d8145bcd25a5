"""Alembic migrations for the store; run them with `store.migrate.upgrade`."""
