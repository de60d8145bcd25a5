"""Schema migrations and URL handling."""

from __future__ import annotations

import threading
from pathlib import Path

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect, text

from weft.store import Store
from weft.store.tables import metadata
from weft.store.urls import normalize_url

# The newest migration in the folder: each new one moves the head.
HEAD = max(
    p.name[:4]
    for p in (Path(__file__).resolve().parents[2] / "store" / "migrations" / "versions").glob(
        "[0-9][0-9][0-9][0-9]_*.py"
    )
)

TABLES = {
    "alembic_version",
    "messages",
    "events",
    "kv",
    "snapshots",
    "threads",
    "context_boundaries",
    "effects",
    "transcript_revisions",
    "idempotency_keys",
    "budgets",
    "rate_limit_keys",
    "rate_limit_grants",
    "jobs",
    "job_items",
}


def _tables(store: Store) -> set[str]:
    return set(inspect(store.engine).get_table_names())


def _revision(store: Store) -> str:
    with store.engine.connect() as connection:
        return str(connection.scalar(text("SELECT version_num FROM alembic_version")))


def test_open_creates_schema_at_head(store_url: str) -> None:
    """Opening an empty database creates every table and records the head revision."""
    with Store.open(store_url) as store:
        assert TABLES <= _tables(store)
        assert _revision(store) == HEAD


def test_open_twice_is_idempotent(store_url: str) -> None:
    """Opening an already migrated database again keeps its schema and data."""
    with Store.open(store_url) as store:
        store.values.set("t", "k", 1)
    with Store.open(store_url) as store:
        assert _revision(store) == HEAD
        assert store.values.get("t", "k") == 1


def test_concurrent_opens_migrate_once(store_url: str) -> None:
    """Several workers opening a fresh database at once all succeed."""
    errors: list[BaseException] = []

    def open_and_close() -> None:
        try:
            Store.open(store_url).close()
        except BaseException as error:  # collected to fail the test in the main thread
            errors.append(error)

    workers = [threading.Thread(target=open_and_close) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    with Store.open(store_url, migrate=False) as store:
        assert _revision(store) == HEAD


def test_open_without_migrate_leaves_database_empty(store_url: str) -> None:
    """`migrate=False` connects without creating any table."""
    with Store.open(store_url, migrate=False) as store:
        assert not TABLES & _tables(store)


def test_sqlite_open_creates_parent_directories(tmp_path: Path) -> None:
    """A SQLite URL whose directories do not exist yet gets them created."""
    path = tmp_path / "a" / "b" / "store.db"
    with Store.open(f"sqlite:///{path}"):
        assert path.exists()


def test_sqlite_uses_wal_and_foreign_keys(sqlite_store: Store) -> None:
    """SQLite connections run in WAL mode with foreign keys and a busy timeout."""
    with sqlite_store.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar_one() >= 1000


def test_postgres_urls_use_psycopg() -> None:
    """Bare postgresql:// and postgres:// URLs map to psycopg 3; explicit drivers stay."""
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgres://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("postgresql+psycopg://u@h/db").drivername == "postgresql+psycopg"
    assert normalize_url("sqlite:///x.db").drivername == "sqlite"


def test_migrations_match_the_tables(store: Store) -> None:
    """The migrated schema equals `tables.metadata`, so the two cannot drift apart."""
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, metadata) == []
