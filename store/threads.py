"""Thread rows in the store: what is kept to list a thread, its env sealed at rest."""

from __future__ import annotations

import builtins
from collections.abc import Hashable

from sqlalchemy import Connection, RowMapping, bindparam, func, select, update

from weft.activities.crypto import Keyring
from weft.contract.events import Event
from weft.contract.thread_env import EnvEntry
from weft.store.database import Database
from weft.store.events import insert_events
from weft.store.rows import ThreadRow, row_to_thread, thread_to_row
from weft.store.sealed import seal, unseal
from weft.store.tables import threads
from weft.store.thread_cache_budget import DEFAULT_THREADS
from weft.store.thread_env_rows import ThreadEnvRow, ThreadEnvRows

# A thread in one of these statuses runs no more: what its queue held never runs.
CLOSED_STATUSES = ("completed", "cancelled", "failed")


# Every step reads it: built once, so SQLAlchemy keeps its cache key.
_THREAD_ROW = select(threads).where(threads.c.thread_id == bindparam("thread_id"))


class Threads:
    """One row per thread, upserted as the thread changes; env sealed with the keyring."""

    def __init__(
        self, database: Database, keyring: Keyring | None, *, cached_threads: int = DEFAULT_THREADS
    ) -> None:
        self._db = database
        self._keyring = keyring
        # What tool calls read of each row, kept between them (thread_env_rows.py).
        self.env_rows = ThreadEnvRows(cached_threads)

    def upsert(self, row: ThreadRow) -> None:
        """Insert the row, or update every column of it but `created_at` and `tenant`
        (a thread's tenant is the one it started with)."""
        values = thread_to_row(row)
        values["env"] = seal(row.env, self._keyring, bound_to=_bound_to(row.thread_id))
        kept = ("thread_id", "created_at", "tenant")
        changed = {k: v for k, v in values.items() if k not in kept}
        statement = (
            self._db.insert(threads)
            .values(values)
            .on_conflict_do_update(index_elements=["thread_id"], set_=changed)
        )
        with self._db.write() as connection:
            connection.execute(statement)

    def get(self, thread_id: str) -> ThreadRow | None:
        """The thread's row, or None."""
        with self._db.read() as connection:
            return self.get_in(connection, thread_id)

    def get_in(self, connection: Connection, thread_id: str) -> ThreadRow | None:
        """The thread's row as `connection`'s transaction sees it, or None."""
        row = connection.execute(_THREAD_ROW, {"thread_id": thread_id}).mappings().first()
        return None if row is None else self._thread(row)

    def tenant(self, thread_id: str) -> str | None:
        """The tenant the thread belongs to, or None when it has no row."""
        query = select(threads.c.tenant).where(threads.c.thread_id == thread_id)
        with self._db.read() as connection:
            found: str | None = connection.execute(query).scalar_one_or_none()
        return found

    def env_row(self, thread_id: str, version: Hashable | None) -> ThreadEnvRow | None:
        """The user and own env of the thread, from the copy kept at `version`
        (thread_env_rows.py; None: read the row) or else from the row, which is then
        kept. None when the thread has no row."""
        kept = self.env_rows.get(thread_id, version)
        if kept is not None:
            return kept
        with self._db.read() as connection:
            return self._read_env_row(connection, thread_id, version)

    def env_row_in(
        self, connection: Connection, thread_id: str, version: Hashable | None
    ) -> ThreadEnvRow | None:
        """`env_row`, the row read (when no copy is kept) in the caller's transaction."""
        kept = self.env_rows.get(thread_id, version)
        if kept is not None:
            return kept
        return self._read_env_row(connection, thread_id, version)

    def _read_env_row(
        self, connection: Connection, thread_id: str, version: Hashable | None
    ) -> ThreadEnvRow | None:
        row = self.get_in(connection, thread_id)
        if row is None:
            return None
        read = ThreadEnvRow(user_id=row.user_id, env=row.env)
        self.env_rows.keep(thread_id, version, read)
        return read

    def list(
        self, *, agent: str | None = None, status: str | None = None, limit: int = 100
    ) -> builtins.list[ThreadRow]:
        """Thread rows, newest first, optionally of one agent and/or status."""
        query = select(threads)
        if agent is not None:
            query = query.where(threads.c.agent == agent)
        if status is not None:
            query = query.where(threads.c.status == status)
        query = query.order_by(threads.c.created_at.desc(), threads.c.thread_id.desc())
        with self._db.read() as connection:
            rows = connection.execute(query.limit(limit)).mappings().all()
        return [self._thread(row) for row in rows]

    def queued_by_agent(self) -> dict[str, int]:
        """Entries waiting in the queues of threads not closed, summed per agent (each
        thread's `queue_depth`, projected from its newest `queue.changed`)."""
        query = (
            select(threads.c.agent, func.sum(threads.c.queue_depth))
            .where(threads.c.status.not_in(CLOSED_STATUSES))
            .group_by(threads.c.agent)
        )
        with self._db.read() as connection:
            return {agent: int(total or 0) for agent, total in connection.execute(query)}

    def set_env(self, thread_id: str, name: str, entry: EnvEntry, event: Event) -> None:
        """Set one env value of the thread (sealed with the rest) and record `event`, in
        one transaction; KeyError when the thread has no row."""

        def once() -> None:
            with self._db.write() as connection:
                self._db.lock_thread(connection, thread_id)
                query = select(threads.c.env).where(threads.c.thread_id == thread_id)
                column = connection.execute(query).scalar_one_or_none()
                if column is None:
                    raise KeyError(f"thread {thread_id} has no row in the store")
                bound_to = _bound_to(thread_id)
                env = unseal(column, self._keyring, bound_to=bound_to)
                env[name] = entry.model_dump(mode="json")
                connection.execute(
                    update(threads)
                    .where(threads.c.thread_id == thread_id)
                    .values(env=seal(env, self._keyring, bound_to=bound_to))
                )
                insert_events(self._db, connection, {thread_id: [event]})

        self._db.retrying(once)
        self.env_rows.forget(thread_id)

    def _thread(self, row: RowMapping) -> ThreadRow:
        thread = row_to_thread(row)
        thread.env = unseal(thread.env, self._keyring, bound_to=_bound_to(thread.thread_id))
        return thread


def _bound_to(thread_id: str) -> str:
    return f"thread {thread_id}"
