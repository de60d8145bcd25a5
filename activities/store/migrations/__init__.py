"""Alembic migrations for the store; run them with `activities.store.migrate.upgrade`."""
