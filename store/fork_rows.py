"""A fork's rows in the store, written in one transaction and removed in one.

A fork is seeded before its workflow starts (the workflow reads what it was given), so a
start that fails must not leave the rows behind: `seed_fork` writes them all or nothing,
`discard_fork` removes them when the start did not happen, and `is_unstarted_fork` tells a
retry with the same id that the rows it finds are such leftovers (docs/time-travel.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Table, delete, select

from weft.contract.budget import Budget
from weft.contract.messages import Message
from weft.store.budget_rows import new_ledger_row
from weft.store.history import ThreadLinks, seed_state_in
from weft.store.messages import insert_messages, message_rows
from weft.store.rows import ThreadRow, thread_to_row
from weft.store.sealed import seal
from weft.store.store import Store
from weft.store.tables import (
    budgets,
    context_boundaries,
    events,
    file_history,
    files,
    kv,
    kv_history,
    message_history,
    messages,
    thread_links,
    threads,
    transcript_revisions,
)

# What a fork writes under its own id, and `discard_fork` removes: (table, thread column).
_FORK_TABLES: tuple[tuple[Table, str], ...] = (
    (messages, "thread_id"),
    (message_history, "thread_id"),
    (transcript_revisions, "thread_id"),
    (kv, "thread_id"),
    (kv_history, "thread_id"),
    (files, "thread_id"),
    (file_history, "thread_id"),
    (context_boundaries, "thread_id"),
    (thread_links, "thread_id"),
    (budgets, "root_thread_id"),
    (threads, "thread_id"),
)


class ThreadTaken(ValueError):
    """The store already holds a thread with the fork's id."""


@dataclass(frozen=True)
class ForkSeed:
    """Everything a fork starts with in the store."""

    thread: ThreadRow
    messages: list[Message]
    values: dict[str, str]  # encoded, as kv stores them
    files: list[dict[str, Any]]
    boundaries: list[dict[str, Any]]  # context_boundaries rows, under the fork's id
    link: dict[str, Any]
    limits: Budget
    now: datetime


def seed_fork(store: Store, seed: ForkSeed) -> None:
    """Write the fork's row, transcript, values, files, boundaries, link and budget ledger
    in one transaction; `ThreadTaken` (and nothing written) when its id is in use."""
    database = store.database
    thread_id = seed.thread.thread_id
    row = thread_to_row(seed.thread)
    row["env"] = seal(seed.thread.env, store.keyring, bound_to=f"thread {thread_id}")

    def once() -> None:
        with database.write() as connection:
            database.lock_thread(connection, thread_id)
            if _thread_known(connection, thread_id):
                raise ThreadTaken(f"thread {thread_id!r} already exists in this store")
            connection.execute(threads.insert().values(row))
            rows = message_rows(seed.messages)
            if rows:
                insert_messages(database, connection, rows)
            seed_state_in(connection, thread_id, seed.values, seed.files)
            if seed.boundaries:
                connection.execute(context_boundaries.insert(), seed.boundaries)
            ThreadLinks(database).set_forked_from(connection, thread_id, seed.link)
            # A fork is the root of its own tree, so it opens its own ledger, as thread.init does.
            connection.execute(
                budgets.insert().values(**new_ledger_row(thread_id, seed.limits, seed.now))
            )

    database.retrying(once)


def is_unstarted_fork(store: Store, thread_id: str) -> bool:
    """True when `thread_id` holds a fork's rows but no event: a fork whose workflow never
    wrote (its start failed, or has not run yet: the caller asks Temporal which)."""
    with store.database.read() as connection:
        linked = connection.scalar(
            select(thread_links.c.forked_from).where(thread_links.c.thread_id == thread_id)
        )
        return linked is not None and not _any_event(connection, thread_id)


def discard_fork(store: Store, thread_id: str) -> None:
    """Remove the rows `seed_fork` wrote for a fork whose workflow did not start, in one
    transaction; a thread that has events is left alone."""
    database = store.database

    def once() -> None:
        with database.write() as connection:
            database.lock_thread(connection, thread_id)
            if _any_event(connection, thread_id):
                return
            for table, column in _FORK_TABLES:
                connection.execute(delete(table).where(table.c[column] == thread_id))

    database.retrying(once)


def _thread_known(connection: Connection, thread_id: str) -> bool:
    found = connection.scalar(select(threads.c.thread_id).where(threads.c.thread_id == thread_id))
    return found is not None or _any_event(connection, thread_id)


def _any_event(connection: Connection, thread_id: str) -> bool:
    query = select(events.c.sequence).where(events.c.thread_id == thread_id).limit(1)
    return connection.scalar(query) is not None
