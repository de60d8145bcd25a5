"""PostgreSQL pooled connections: pinged only after an idle spell (store/urls.py).

The server's own `pg_terminate_backend` kills the pooled connections, as a restart or an
idle timeout would. An idle connection found dead is replaced before anyone uses it; one
used moments ago is not pinged (no round trip per checkout), so a statement on it fails
once, and the pool replaces every connection it had.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

from weft.store import urls
from weft.store.urls import create_store_engine


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    engine = create_store_engine(postgres_url)
    try:
        yield engine
    finally:
        engine.dispose()


def _backend_pid(engine: Engine) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(text("SELECT pg_backend_pid()")))


def _terminate(postgres_url: str, pid: int) -> None:
    """Kill backend `pid` from a connection of its own."""
    admin = create_engine(urls.normalize_url(postgres_url))
    try:
        with admin.connect() as connection:
            assert connection.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    finally:
        admin.dispose()


def test_an_idle_dead_connection_is_replaced_before_use(engine, postgres_url, monkeypatch):
    pid = _backend_pid(engine)
    _terminate(postgres_url, pid)
    monkeypatch.setattr(urls, "IDLE_PING_SECONDS", 0.0)  # every pooled connection is idle
    assert _backend_pid(engine) != pid  # no error: pinged, found dead, replaced


def test_a_connection_used_moments_ago_is_not_pinged(engine, postgres_url):
    """No ping for a hot connection: its death shows once, then the pool starts afresh."""
    pid = _backend_pid(engine)
    _terminate(postgres_url, pid)
    with pytest.raises(OperationalError) as failed:
        _backend_pid(engine)
    assert failed.value.connection_invalidated
    assert _backend_pid(engine) != pid
