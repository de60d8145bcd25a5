"""What the store's users need from it, aggregate by aggregate, as Protocols.

`Store` (store/store.py, SQLAlchemy) implements every one; mypy checks it there. Code
that reads or writes one aggregate takes the narrow holder (`HasMessages`, `HasEvents`,
...) so a unit test can hand it an in-memory double (tests/doubles/) instead of opening a
database. Aggregates whose users need the shared transaction rules themselves (budgets,
effects, variable requests, step reads, `Store.database`) stay concrete: a double of them
would have to re-implement the locking it exists to test.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Hashable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from weft.contract.context import ContextBoundary
    from weft.contract.events import Event
    from weft.contract.messages import Message
    from weft.contract.thread_env import EnvEntry
    from weft.store.file_rows import FileStat
    from weft.store.rows import ThreadRow
    from weft.store.thread_env_rows import ThreadEnvRow


class MessageStore(Protocol):
    """A thread's stored messages, by id or by position."""

    def append(self, messages_: Sequence[Message]) -> None: ...

    def get(self, thread_id: str, message_id: str) -> Message | None: ...

    def get_many(self, thread_id: str, ids: Sequence[str]) -> builtins.list[Message]: ...

    def list(
        self,
        thread_id: str,
        *,
        after_position: int = -1,
        limit: int | None = None,
        before_position: int | None = None,
        depth: int | None = None,
        parent_id: str | None = None,
    ) -> builtins.list[Message]: ...


class EventLog(Protocol):
    """A thread's numbered events, and the writes that commit messages with their events."""

    def append(self, events_: Sequence[Event]) -> list[Event]: ...

    def record(
        self,
        messages_: Sequence[Message],
        events_: Sequence[Event],
        *,
        unless_closed: bool = False,
    ) -> list[Event]: ...

    def read(
        self,
        thread_id: str,
        *,
        after: int = 0,
        limit: int = 500,
        types: Sequence[str] | None = None,
    ) -> list[Event]: ...

    def last_sequence(self, thread_id: str) -> int: ...

    def last_sequences(self, thread_ids: Collection[str]) -> dict[str, int]: ...

    def sequence_of(self, thread_id: str, event_id: str) -> int | None: ...

    def update_message(
        self, thread_id: str, message_id: str, changes: dict[str, Any], event: Event
    ) -> Message | None: ...

    def delete_message(self, thread_id: str, message_id: str, event: Event) -> list[str]: ...


class KvStore(Protocol):
    """A thread's key-value store (Runtime §14)."""

    def get(self, thread_id: str, key: str) -> Any | None: ...

    def set(self, thread_id: str, key: str, value: Any) -> None: ...


class SnapshotStore(Protocol):
    """Content-addressed JSON documents: definition snapshots, tool catalogues."""

    def get(self, snapshot_id: str) -> dict[str, Any] | None: ...

    def put(self, snapshot_id: str, data: dict[str, Any]) -> None: ...


class ThreadFiles(Protocol):
    """Threads' filesystems over content-addressed blobs."""

    def put_blob(self, data: bytes) -> str: ...

    def get_blob(self, digest: str) -> bytes | None: ...

    def read_file(self, thread_id: str, path: str) -> bytes: ...

    def stat_file(self, thread_id: str, path: str) -> FileStat | None: ...

    def write_file(
        self, thread_id: str, path: str, content: bytes | str, *, mime_type: str | None = None
    ) -> FileStat: ...

    def copy_files(
        self,
        source_thread_id: str,
        target_thread_id: str,
        paths: Sequence[str],
        *,
        target_dir: str = "/attachments",
        copy_id: str,
    ) -> list[str]: ...


class BoundaryStore(Protocol):
    """Context compaction boundaries, each written once with its events."""

    def add(self, boundary: ContextBoundary, events_: Sequence[Event] = ()) -> ContextBoundary: ...

    def get(self, thread_id: str, boundary_id: str) -> ContextBoundary | None: ...

    def list(self, thread_id: str) -> builtins.list[ContextBoundary]: ...


class ThreadRows(Protocol):
    """One row per thread: its start, status, links and env."""

    def get(self, thread_id: str) -> ThreadRow | None: ...

    def upsert(self, row: ThreadRow) -> None: ...

    def set_env(self, thread_id: str, name: str, entry: EnvEntry, event: Event) -> None: ...

    def env_row(self, thread_id: str, version: Hashable | None) -> ThreadEnvRow | None: ...


class SubagentRows(Protocol):
    """A parent's subagents, projected from their `subagent.*` events (entries as JSON)."""

    def find(self, parent_thread_id: str, reference: str) -> dict[str, Any] | None: ...

    def list(self, parent_thread_id: str) -> builtins.list[dict[str, Any]]: ...


# Holders: what a caller takes when it needs one aggregate of the store. Read-only
# properties, so the store's plain attributes satisfy them.


class HasMessages(Protocol):
    """Holds `messages`."""

    @property
    def messages(self) -> MessageStore: ...


class HasEvents(Protocol):
    """Holds `events`."""

    @property
    def events(self) -> EventLog: ...


class HasValues(Protocol):
    """Holds `values`."""

    @property
    def values(self) -> KvStore: ...


class HasSnapshots(Protocol):
    """Holds `snapshots`."""

    @property
    def snapshots(self) -> SnapshotStore: ...


class HasFiles(Protocol):
    """Holds `files`."""

    @property
    def files(self) -> ThreadFiles: ...


class HasBoundaries(Protocol):
    """Holds `boundaries`."""

    @property
    def boundaries(self) -> BoundaryStore: ...


class HasThreads(Protocol):
    """Holds `threads`."""

    @property
    def threads(self) -> ThreadRows: ...


class HasSubagents(Protocol):
    """Holds `subagents`."""

    @property
    def subagents(self) -> SubagentRows: ...


class StoreLike(
    HasMessages,
    HasEvents,
    HasValues,
    HasSnapshots,
    HasFiles,
    HasBoundaries,
    HasThreads,
    HasSubagents,
    Protocol,
):
    """The aggregates a thread's reads and writes go through, as one store."""
