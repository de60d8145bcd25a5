"""An effect's writes, held back until it returns and then committed all at once.

An effect's `set_value` and `emit` go to a copy of the store whose `values` and `events`
stage them; `get_value` sees the staged values first. `Effects.finish` commits them with
the run's outcome in one transaction, so an attempt that fails leaves nothing behind and
a retry after a finished run writes nothing twice (docs/effects.md). Other writes (files,
`update_message`) go straight to the store.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from weft.contract.events import Event
from weft.store import Store
from weft.store import kv as kv_rules
from weft.store.database import Database
from weft.store.events import Events
from weft.store.values import Values

# A staged deletion (set_value(key, None)).
_DELETED = object()


class StagedValues(Values):
    """Values whose writes wait for the commit; reads see them first."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.staged: dict[tuple[str, str], Any] = {}

    def get(self, thread_id: str, key: str) -> Any | None:
        """The staged value of `key` if this run set it, else the stored one."""
        staged = self.staged.get((thread_id, key))
        if staged is _DELETED:
            return None
        return staged if staged is not None else super().get(thread_id, key)

    def set(self, thread_id: str, key: str, value: Any) -> None:
        """Check `key` and `value` now (the caller hears of a bad one at once); stage them."""
        kv_rules.check_key(key)
        if value is None:
            self.staged[(thread_id, key)] = _DELETED
        else:
            kv_rules.encode_value(key, value)
            self.staged[(thread_id, key)] = copy.deepcopy(value)

    def encoded(self, thread_id: str) -> dict[str, str | None]:
        """The staged writes of `thread_id`, encoded for `Effects.finish` (None deletes)."""
        return {
            key: None if value is _DELETED else kv_rules.encode_value(key, value)
            for (thread, key), value in self.staged.items()
            if thread == thread_id
        }


class StagedEvents(Events):
    """Events whose `append` waits for the commit; everything else goes straight through."""

    def __init__(self, database: Database) -> None:
        super().__init__(database)
        self.staged: list[Event] = []

    def append(self, events_: Sequence[Event]) -> list[Event]:
        """Stage the events (numbered when committed)."""
        self.staged.extend(events_)
        return list(events_)


def staged_store(store: Store) -> tuple[Store, StagedValues, StagedEvents]:
    """A view of `store` whose value and event writes are staged; the stagers, to commit."""
    view = copy.copy(store)
    values, events = StagedValues(store.database), StagedEvents(store.database)
    view.values, view.events = values, events
    return view, values, events
