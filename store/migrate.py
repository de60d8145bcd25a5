"""Run the store's Alembic migrations from code, safely when several workers start at once."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, text

from weft.store.urls import WRITE_OPTION

MIGRATIONS_DIR = Path(__file__).parent / "migrations"

# Advisory lock key (classid, objid) for migrations; events use other class ids.
MIGRATION_LOCK = (0x77656674, 0)  # "weft"


def alembic_config() -> Config:
    """An Alembic config pointing at the migrations shipped inside this package."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema at `engine` up to `revision`, in one transaction.

    On PostgreSQL a transaction-scoped advisory lock makes concurrent workers take turns:
    the first migrates, the others wait, then find the schema at head and do nothing.
    On SQLite `BEGIN IMMEDIATE` holds the single write lock for the same effect.
    """
    config = alembic_config()
    with engine.connect() as connection:
        connection = connection.execution_options(**{WRITE_OPTION: True})
        with connection.begin():
            if engine.dialect.name == "postgresql":
                connection.execute(
                    text("SELECT pg_advisory_xact_lock(:classid, :objid)"),
                    {"classid": MIGRATION_LOCK[0], "objid": MIGRATION_LOCK[1]},
                )
            config.attributes["connection"] = connection
            command.upgrade(config, revision)
