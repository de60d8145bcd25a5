"""SQLite's durability setting is chosen on purpose: NORMAL in WAL unless the URL says."""

from __future__ import annotations

from pathlib import Path

import pytest

from weft.store.urls import create_store_engine

# PRAGMA synchronous reports 1 for NORMAL, 2 for FULL.
NORMAL, FULL = 1, 2


def _pragma(url: str, name: str) -> object:
    engine = create_store_engine(url)
    try:
        with engine.connect() as connection:
            return connection.exec_driver_sql(f"PRAGMA {name}").scalar()
    finally:
        engine.dispose()


def test_wal_with_synchronous_normal_by_default(tmp_path: Path) -> None:
    """No fsync per commit: a killed process loses nothing committed (docs/performance.md)."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    assert _pragma(url, "journal_mode") == "wal"
    assert _pragma(url, "synchronous") == NORMAL


def test_synchronous_full_on_request(tmp_path: Path) -> None:
    """`?synchronous=full` syncs every commit, for stores that must survive power loss."""
    assert _pragma(f"sqlite:///{tmp_path / 'store.db'}?synchronous=full", "synchronous") == FULL


def test_an_unknown_synchronous_level_is_refused(tmp_path: Path) -> None:
    """OFF (or a typo) is refused by name rather than silently weakening durability."""
    with pytest.raises(ValueError, match=r"synchronous='off' is not one of normal, full, extra"):
        create_store_engine(f"sqlite:///{tmp_path / 'store.db'}?synchronous=off")
