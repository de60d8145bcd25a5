"""`store.idempotency`: claim a key once, replay its reply, release, expire, take over."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from weft.store import Store
from weft.store.idempotency import Claimed, InProgress, Mismatch, Recorded
from weft.store.tables import idempotency_keys

SCOPE = "POST /threads/t1/messages"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def _key() -> str:
    return f"key-{uuid.uuid4().hex}"


def _rows(store: Store) -> int:
    with store.engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(idempotency_keys)) or 0)


def test_a_key_is_claimed_once_and_its_reply_replayed(store: Store) -> None:
    key = _key()
    claim = store.idempotency.claim(key, SCOPE, "f1", now=T0)
    assert isinstance(claim, Claimed) and not claim.took_over
    assert store.idempotency.claim(key, SCOPE, "f1", now=T0) == InProgress(T0)
    assert store.idempotency.claim(key, "POST /threads", "f2", now=T0) == Mismatch(SCOPE)
    body = {"turnId": "turn-1", "status": "queued", "nested": [1, "two", None]}
    assert store.idempotency.record(key, claim.claim_id, 202, body)
    assert store.idempotency.claim(key, SCOPE, "f1", now=T0) == Recorded(202, body)
    # Recorded once: neither recording again nor releasing changes it.
    assert not store.idempotency.record(key, claim.claim_id, 500, {})
    assert not store.idempotency.release(key, claim.claim_id)
    assert store.idempotency.claim(key, SCOPE, "f2", now=T0) == Mismatch(SCOPE)


def test_a_released_key_may_be_claimed_again(store: Store) -> None:
    key = _key()
    first = store.idempotency.claim(key, SCOPE, "f1", now=T0)
    assert isinstance(first, Claimed)
    assert store.idempotency.release(key, first.claim_id)
    # Released: even another request may use the key now.
    second = store.idempotency.claim(key, "POST /threads", "f2", now=T0)
    assert isinstance(second, Claimed) and second.claim_id != first.claim_id


def test_keys_expire_after_a_day_and_are_purged(store: Store) -> None:
    key, other = _key(), _key()
    done = store.idempotency.claim(key, SCOPE, "f1", now=T0)
    assert isinstance(done, Claimed)
    store.idempotency.record(key, done.claim_id, 201, {"threadId": "t1"})
    younger = store.idempotency.claim(other, SCOPE, "f1", now=T0 + timedelta(hours=2))
    assert isinstance(younger, Claimed)
    store.idempotency.record(other, younger.claim_id, 202, {})
    later = T0 + timedelta(hours=24, seconds=1)
    # The expired key is free for any request; the younger one is still recorded.
    assert isinstance(store.idempotency.claim(key, "POST /threads", "f9", now=later), Claimed)
    assert store.idempotency.claim(other, SCOPE, "f1", now=later) == Recorded(202, {})
    # Purged: the younger key; kept: the one claimed again at `later`.
    assert store.idempotency.purge_expired(now=T0 + timedelta(hours=27)) == 1
    assert _rows(store) == 1


def test_an_abandoned_pending_claim_is_taken_over_after_the_lease(store: Store) -> None:
    key = _key()
    abandoned = store.idempotency.claim(key, SCOPE, "f1", now=T0)
    assert isinstance(abandoned, Claimed)
    within = T0 + store.idempotency.lease - timedelta(seconds=1)
    assert isinstance(store.idempotency.claim(key, SCOPE, "f1", now=within), InProgress)
    assert isinstance(store.idempotency.claim(key, SCOPE, "f2", now=within), Mismatch)
    taken = store.idempotency.claim(key, SCOPE, "f1", now=T0 + store.idempotency.lease)
    assert isinstance(taken, Claimed) and taken.took_over
    # The abandoned attempt can neither record nor release any more.
    assert not store.idempotency.record(key, abandoned.claim_id, 202, {"late": True})
    assert not store.idempotency.release(key, abandoned.claim_id)
    assert store.idempotency.record(key, taken.claim_id, 202, {"ok": True})
    replay = store.idempotency.claim(key, SCOPE, "f1", now=T0 + store.idempotency.lease)
    assert replay == Recorded(202, {"ok": True})


def _claim_at_once(store: Store, key: str, claimants: int) -> list[object]:
    """What `claimants` threads get claiming `key` at the same moment."""
    start = threading.Barrier(claimants)
    results: list[object] = []
    lock = threading.Lock()

    def claim() -> None:
        start.wait()
        result = store.idempotency.claim(key, SCOPE, "f1")
        with lock:
            results.append(result)

    workers = [threading.Thread(target=claim) for _ in range(claimants)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return results


def test_concurrent_claims_of_a_new_key_have_one_winner(store: Store) -> None:
    """Eight threads claim the same new key at once: exactly one holds it."""
    for _ in range(3):
        results = _claim_at_once(store, _key(), 8)
        assert len(results) == 8
        assert sum(isinstance(r, Claimed) for r in results) == 1
        assert sum(isinstance(r, InProgress) for r in results) == 7
