"""In-memory doubles of the store's Protocols (store/protocols.py), for pure unit tests.

Only for code under test that merely reads or writes an aggregate: the store's own
behaviour (transactions, locks, fences, SQLite and PostgreSQL) is tested on real databases
in tests/store/.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from weft.contract.messages import Message
from weft.store.protocols import HasMessages, MessageStore


class MemoryMessages:
    """A `MessageStore` over a dict, ordered by position as the store lists them."""

    def __init__(self) -> None:
        self._by_id: dict[tuple[str, str], Message] = {}

    def append(self, messages_: Sequence[Message]) -> None:
        """Store each message once, as the store's idempotent append does."""
        for message in messages_:
            self._by_id.setdefault((message.thread_id, message.id), message)

    def get(self, thread_id: str, message_id: str) -> Message | None:
        return self._by_id.get((thread_id, message_id))

    def get_many(self, thread_id: str, ids: Sequence[str]) -> builtins.list[Message]:
        wanted = set(ids)
        return [m for m in self.list(thread_id) if m.id in wanted]

    def list(
        self,
        thread_id: str,
        *,
        after_position: int = -1,
        limit: int | None = None,
        before_position: int | None = None,
        depth: int | None = None,
        parent_id: str | None = None,
    ) -> builtins.list[Message]:
        if depth is not None or parent_id is not None:
            raise NotImplementedError("MemoryMessages lists the main transcript only")
        found = sorted(
            (
                m
                for (thread, _), m in self._by_id.items()
                if thread == thread_id
                and m.position > after_position
                and (before_position is None or m.position < before_position)
            ),
            key=lambda m: m.position,
        )
        return found if limit is None else found[:limit]


class MemoryStore:
    """The aggregates the doubles cover, held as the store holds them."""

    def __init__(self) -> None:
        self.messages: MessageStore = MemoryMessages()


def _is_a_message_holder(store: MemoryStore) -> HasMessages:
    """Never called: mypy checks here that the double implements the Protocol."""
    return store
