"""A thread's fork links in its read model: where it was forked from, and which thread took
over when it was rewound (docs/time-travel.md)."""

from __future__ import annotations

from weft.contract.forks import ForkLink
from weft.contract.thread import ThreadRead
from weft.store import Store
from weft.store.history import ThreadLinks


def with_lineage(store: Store, read: ThreadRead) -> ThreadRead:
    """`read` with its `forkedFrom` and `successorThreadId` from the store (one read)."""
    forked_from, successor = ThreadLinks(store.database).get(read.thread_id)
    if forked_from is None and successor is None:
        return read
    return read.model_copy(
        update={
            "forked_from": None if forked_from is None else ForkLink.model_validate(forked_from),
            "successor_thread_id": successor,
        }
    )
