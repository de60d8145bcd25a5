"""`store.rate_limits`: places in a key's window, shared by every writer on the database."""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import select

from weft.store import Store
from weft.store.rate_limit_window import WindowLimit
from weft.store.rate_limits import rate_limit_grants

THREE_PER_MINUTE = WindowLimit(requests=3, tokens=None, window_seconds=60)


def _key() -> str:
    return f"key-{uuid.uuid4().hex[:8]}"


def _starts(store: Store, key: str) -> list[float]:
    with store.engine.connect() as connection:
        query = select(rate_limit_grants.c.starts_at).where(rate_limit_grants.c.limit_key == key)
        return sorted(connection.execute(query).scalars())


def test_a_full_window_delays_the_next_request(store: Store) -> None:
    """Three requests start at once; the fourth is placed a window (plus guard) later."""
    key = _key()
    delays = [store.rate_limits.reserve(key, THREE_PER_MINUTE, 0).delay_seconds for _ in range(3)]
    assert all(d <= 0 for d in delays)
    fourth = store.rate_limits.reserve(key, THREE_PER_MINUTE, 0)
    assert fourth.grant_id is not None
    assert fourth.delay_seconds == pytest.approx(THREE_PER_MINUTE.hold_seconds, abs=1.0)


def test_a_delay_over_the_callers_bound_reserves_nothing(store: Store) -> None:
    """With `max_delay` below the wait, nothing is reserved: asking again gets the same."""
    key = _key()
    for _ in range(3):
        store.rate_limits.reserve(key, THREE_PER_MINUTE, 0)
    refused = store.rate_limits.reserve(key, THREE_PER_MINUTE, 0, max_delay=5)
    again = store.rate_limits.reserve(key, THREE_PER_MINUTE, 0, max_delay=5)
    assert refused.grant_id is None and again.grant_id is None
    assert again.delay_seconds == pytest.approx(refused.delay_seconds, abs=1.0)
    assert len(_starts(store, key)) == 3


def test_a_released_place_is_taken_by_the_next_request(store: Store) -> None:
    """A request that gives its place back lets the next one start at once."""
    key = _key()
    grants = [store.rate_limits.reserve(key, THREE_PER_MINUTE, 0) for _ in range(3)]
    assert grants[-1].grant_id is not None
    store.rate_limits.release(grants[-1].grant_id)
    assert store.rate_limits.reserve(key, THREE_PER_MINUTE, 0).delay_seconds <= 0


def test_settled_tokens_replace_the_estimate(store: Store) -> None:
    """A request reserved at its estimate and settled lower leaves room for the next."""
    key = _key()
    limit = WindowLimit(requests=None, tokens=1000, window_seconds=60)
    first = store.rate_limits.reserve(key, limit, 900)
    assert first.grant_id is not None
    assert store.rate_limits.reserve(key, limit, 500, max_delay=0).grant_id is None
    store.rate_limits.settle(first.grant_id, 300)
    assert store.rate_limits.reserve(key, limit, 500, max_delay=0).grant_id is not None


def test_a_block_delays_every_request_of_the_key(store: Store) -> None:
    """A Retry-After block holds every new request of the key, and only of that key;
    a shorter block does not cut a longer one."""
    key, other = _key(), _key()
    store.rate_limits.block(key, 30)
    store.rate_limits.block(key, 1)
    assert store.rate_limits.blocked_for(key) == pytest.approx(30, abs=1.0)
    assert store.rate_limits.reserve(key, THREE_PER_MINUTE, 0).delay_seconds == pytest.approx(
        30, abs=1.0
    )
    assert store.rate_limits.reserve(other, THREE_PER_MINUTE, 0).delay_seconds <= 0
    assert store.rate_limits.blocked_for(other) == 0


def test_grants_that_left_the_window_are_dropped(store: Store) -> None:
    """A reservation drops the key's grants older than the window, so the ledger stays small."""
    key = _key()
    short = WindowLimit(requests=100, tokens=None, window_seconds=0.05)
    for _ in range(3):
        store.rate_limits.reserve(key, short, 0)
    with store.engine.begin() as connection:  # age them past the window
        connection.execute(
            rate_limit_grants.update()
            .where(rate_limit_grants.c.limit_key == key)
            .values(starts_at=rate_limit_grants.c.starts_at - 10)
        )
    store.rate_limits.reserve(key, short, 0)
    assert len(_starts(store, key)) == 1


def test_writers_on_two_connections_never_overfill_a_window(store: Store) -> None:
    """Two stores on one database (as two workers) reserving from 8 threads at once: no
    window of the limit holds more than its cap of starts."""
    key = _key()
    limit = WindowLimit(requests=20, tokens=None, window_seconds=5)
    with Store.open(str(store.engine.url.render_as_string(hide_password=False))) as second:
        stores = [store, second]

        def reserve(index: int) -> None:
            for _ in range(10):
                stores[index % 2].rate_limits.reserve(key, limit, 0)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(reserve, range(8)))
    starts = _starts(store, key)
    assert len(starts) == 80
    most = max(sum(1 for s in starts if t <= s < t + 5) for t in starts)
    assert most == 20
