"""Fixtures for the store tests: a SQLite file store, a PostgreSQL store, and both.

PostgreSQL tests run in a database of their own, created for the session and dropped at
the end, because CI shares the server with other sessions. Set WEFT_TEST_POSTGRES_URL to
point elsewhere than postgresql://postgres@127.0.0.1:5432/test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from weft.store import Store
from weft.store.tables import metadata


@pytest.fixture(scope="session")
def postgres_url(postgres_databases: Callable[[], str]) -> str:
    """The URL of the session's PostgreSQL database."""
    return postgres_databases()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """The URL of a SQLite file in a directory that does not exist yet."""
    return f"sqlite:///{tmp_path / 'weft' / 'store.db'}"


@pytest.fixture
def sqlite_store(sqlite_url: str) -> Iterator[Store]:
    """A migrated store on a fresh SQLite file."""
    store = Store.open(sqlite_url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def postgres_store(postgres_url: str) -> Iterator[Store]:
    """A migrated store on the session's PostgreSQL database, emptied after the test."""
    store = Store.open(postgres_url)
    try:
        yield store
    finally:
        names = ", ".join(table.name for table in metadata.sorted_tables)
        with store.engine.begin() as connection:
            connection.execute(text(f"TRUNCATE {names}"))
        store.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest) -> Store:
    """The same test on each backend."""
    backend_store: Store = request.getfixturevalue(f"{request.param}_store")
    return backend_store


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A URL for an empty database on each backend (fresh database for PostgreSQL)."""
    if request.param == "sqlite":
        url: str = request.getfixturevalue("sqlite_url")
        return url
    factory: Callable[[], str] = request.getfixturevalue("postgres_databases")
    return factory()
