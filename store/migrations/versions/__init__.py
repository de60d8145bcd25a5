"""Alembic revision scripts, one schema change each; Alembic skips this file."""
