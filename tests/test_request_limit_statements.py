"""`serve.requestLimits` costs a limited request one read and one write of the rate-limit
ledger, its key's place and its tenant's together (api/request_limits.py,
store/rate_limits.py `reserve_all`).

Counted with the engine's cursor events on SQLite and PostgreSQL. Each place once cost its
own five or six statements (create and lock the key's row, read the clock, drop the grants
that left the window, read the rest, insert): 11 for a key and its tenant on SQLite
(BEGIN IMMEDIATE included), 12 on PostgreSQL. Now SQLite's BEGIN IMMEDIATE, one read of
both keys' rows and grants, one insert of both grants; PostgreSQL locks both keys' rows in
one statement (returning their blocks and the database's clock), reads both keys' grants in
a second (it must follow the lock: a statement sees only what was committed when it
began), and writes in a third. Grants that left the window go in that write on
PostgreSQL, in one more statement on SQLite. The counting at once still admits no more
than the limit, on both backends.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import Connection, event, func, select

from weft.api.auth import Principal
from weft.api.request_limits import KEY_PREFIX, TENANT_PREFIX, RequestLimiter, RequestLimits
from weft.store import Store
from weft.store.rate_limits import rate_limit_grants
from weft.store.urls import WRITE_OPTION

WHO = Principal("k1", "acme", frozenset({"threads:read"}))
KEYS = (KEY_PREFIX + "k1", TENANT_PREFIX + "acme")


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_databases: Callable[[], str]
) -> str:
    """An empty database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'limits.db'}"
    return postgres_databases()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store.open(store_url) as opened:
        yield opened


@contextmanager
def statements_of(store: Store) -> Iterator[list[str]]:
    """Every statement the store's engine runs while inside, whitespace folded."""
    seen: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        seen.append(" ".join(statement.split()))

    def began(conn: Connection) -> None:
        # SQLite's BEGIN runs on the driver's connection (store/urls.py), unseen above.
        if not store.database.postgres:
            immediate = conn.get_execution_options().get(WRITE_OPTION, False)
            seen.append("BEGIN IMMEDIATE" if immediate else "BEGIN")

    event.listen(store.engine, "before_cursor_execute", count)
    event.listen(store.engine, "begin", began)
    try:
        yield seen
    finally:
        event.remove(store.engine, "before_cursor_execute", count)
        event.remove(store.engine, "begin", began)


def _grants(store: Store) -> dict[str, int]:
    """How many grants each key holds."""
    query = select(rate_limit_grants.c.limit_key, func.count()).group_by(
        rate_limit_grants.c.limit_key
    )
    with store.database.read() as connection:
        return {key: count for key, count in connection.execute(query)}


def _ledger_work(statements: list[str]) -> list[str]:
    """The statements of the ledger itself: no transaction control."""
    return [s for s in statements if not s.startswith("BEGIN")]


def test_a_limited_request_reads_once_and_writes_once(store: Store) -> None:
    """A key's place and its tenant's: one read and one write on SQLite, the lock, one read
    and one write on PostgreSQL; each key gets its grant."""
    limiter = RequestLimiter(store, RequestLimits(per_key=100, per_tenant=100))
    assert limiter.admit(WHO) is None  # the keys' rows exist from here on
    with statements_of(store) as seen:
        assert limiter.admit(WHO) is None
    work = _ledger_work(seen)
    writes = [s for s in work if s.startswith("INSERT INTO rate_limit_grants")]
    assert len(writes) == 1 and writes[0].count("), (") == 1, writes  # both grants, one row each
    if store.database.postgres:
        lock, read, write = work
        assert lock.startswith("INSERT INTO rate_limit_keys") and "ON CONFLICT" in lock, lock
        assert "RETURNING" in lock and "clock_timestamp" in lock, lock
        assert read.startswith("SELECT") and "FROM rate_limit_grants" in read, read
    else:
        assert seen[0] == "BEGIN IMMEDIATE", seen
        read, write = work
        assert read.startswith("SELECT") and "rate_limit_keys" in read, read
        assert "rate_limit_grants" in read and "UNION ALL" in read, read
    assert write == writes[0]
    assert _grants(store) == {KEYS[0]: 2, KEYS[1]: 2}


def test_grants_that_left_the_window_go_with_the_write(store: Store) -> None:
    """Grants out of the window are dropped in the same write (PostgreSQL) or one more
    statement (SQLite), and nothing still counted goes with them."""
    limiter = RequestLimiter(store, RequestLimits(per_key=100, per_tenant=100))
    assert limiter.admit(WHO) is None
    an_hour_ago = time.time() - 3600
    with store.database.write() as connection:
        connection.execute(
            rate_limit_grants.insert().values(
                [
                    {
                        "grant_id": f"old-{i}",
                        "limit_key": key,
                        "starts_at": an_hour_ago,
                        "tokens": 0,
                    }
                    for i, key in enumerate(KEYS)
                ]
            )
        )
    assert _grants(store) == {KEYS[0]: 2, KEYS[1]: 2}
    with statements_of(store) as seen:
        assert limiter.admit(WHO) is None
    work = _ledger_work(seen)
    drops = [s for s in work if "DELETE FROM rate_limit_grants" in s]
    assert len(drops) == 1, work
    if store.database.postgres:
        assert len(work) == 3 and drops[0] == work[2], work
        assert drops[0].startswith("WITH") and "INSERT INTO rate_limit_grants" in drops[0]
    else:
        assert len(work) == 3 and drops[0] == work[1], work  # the read, the drop, the insert
    assert _grants(store) == {KEYS[0]: 2, KEYS[1]: 2}  # the old ones gone, the new in


def test_a_refused_request_writes_nothing(store: Store) -> None:
    """At its tenant's limit, a request reads and writes no grant: its key's place is not
    taken either; 429's wait comes from the oldest place counted."""
    limiter = RequestLimiter(store, RequestLimits(per_key=5, per_tenant=1))
    assert limiter.admit(WHO) is None
    with statements_of(store) as seen:
        refused = limiter.admit(WHO)
    assert refused is not None and "tenant acme" in refused.message
    assert 1 <= refused.retry_after_seconds <= 61
    assert not [s for s in seen if "rate_limit_grants (" in s or s.startswith("DELETE")], seen
    assert len(_ledger_work(seen)) == (2 if store.database.postgres else 1), seen
    assert _grants(store) == {KEYS[0]: 1, KEYS[1]: 1}


def test_keys_of_one_tenant_counting_at_once_admit_no_more_than_its_limit(
    store_url: str,
) -> None:
    """Four stores (replicas), each with its own key of one tenant, counting at once: the
    tenant's limit holds across the keys, on both backends."""
    Store.open(store_url).close()
    stores = [Store.open(store_url, migrate=False) for _ in range(4)]
    admitted: list[bool] = []
    start = threading.Barrier(len(stores))

    def hammer(index: int) -> None:
        limiter = RequestLimiter(stores[index], RequestLimits(per_key=100, per_tenant=10))
        who = Principal(f"k{index}", "acme", frozenset({"threads:read"}))
        start.wait()
        admitted.extend(limiter.admit(who) is None for _ in range(6))

    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    try:
        assert len(admitted) == 24 and sum(admitted) == 10
        assert _grants(stores[0])[TENANT_PREFIX + "acme"] == 10
    finally:
        for opened in stores:
            opened.close()
