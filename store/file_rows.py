"""Rows of the `files` table: reading them, directory rules, and the errors they raise.

Every function takes the open connection of the caller's transaction, so checks and
writes of one file operation commit together.
"""

from __future__ import annotations

import errno
import hashlib
from datetime import datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel
from sqlalchemy import Connection, RowMapping, func, select

from weft.store.file_paths import ROOT, ancestors
from weft.store.history import record_paths
from weft.store.kv import StoreLimitError
from weft.store.tables import files

MAX_FILE_BYTES = 64 * 1024 * 1024


class DirectoryNotEmptyError(OSError):
    """`rmdir` of a directory that still holds entries, without `recursive`."""

    def __init__(self, message: str) -> None:
        super().__init__(errno.ENOTEMPTY, message)

    def __str__(self) -> str:
        return str(self.strerror)


class FileStat(BaseModel):
    """What is known about one file or directory of a thread."""

    path: str
    name: str
    kind: Literal["file", "dir"]
    size: int
    mime_type: str | None = None
    digest: str | None = None
    created_at: AwareDatetime | None = None
    updated_at: AwareDatetime | None = None


ROOT_STAT = FileStat(path=ROOT, name="", kind="dir", size=0)


def digest_of(data: bytes, what: str) -> str:
    """The sha256 (hex) of `data`, after checking it is within `MAX_FILE_BYTES`."""
    if len(data) > MAX_FILE_BYTES:
        raise StoreLimitError(
            "max_file_bytes",
            f"{what} is {len(data)} bytes; the limit max_file_bytes is {MAX_FILE_BYTES}",
        )
    return hashlib.sha256(data).hexdigest()


def get_row(connection: Connection, thread_id: str, path: str) -> RowMapping | None:
    """The thread's row at a normalized path, or None."""
    query = select(files).where(files.c.thread_id == thread_id, files.c.path == path)
    return connection.execute(query).mappings().first()


def below(prefix: str) -> Any:
    """Paths strictly below `prefix`, compared exactly: LIKE is case-blind on SQLite."""
    return (func.length(files.c.path) > len(prefix)) & (
        func.substr(files.c.path, 1, len(prefix)) == prefix
    )


def dir_row(thread_id: str, path: str, now: datetime) -> dict[str, Any]:
    """The column values of a new directory."""
    return {
        "thread_id": thread_id,
        "path": path,
        "kind": "dir",
        "blob_digest": None,
        "size": 0,
        "mime_type": None,
        "created_at": now,
        "updated_at": now,
    }


def to_stat(row: RowMapping) -> FileStat:
    """The public view of a row."""
    return FileStat(
        path=row["path"],
        name=row["path"].rsplit("/", 1)[-1],
        kind=row["kind"],
        size=row["size"],
        mime_type=row["mime_type"],
        digest=row["blob_digest"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


def make_parents(connection: Connection, thread_id: str, path: str, now: datetime) -> None:
    """Create the missing directories above `path`; a file in the way is an error."""
    above = ancestors(path)
    if not above:
        return
    query = select(files.c.path, files.c.kind).where(
        files.c.thread_id == thread_id, files.c.path.in_(above)
    )
    existing = {row.path: row.kind for row in connection.execute(query)}
    made = []
    for directory in above:
        kind = existing.get(directory)
        if kind == "file":
            raise not_a_directory(thread_id, directory)
        if kind is None:
            made.append(dir_row(thread_id, directory, now))
            connection.execute(files.insert().values(made[-1]))
    record_paths(connection, thread_id, made)


def require_dir(connection: Connection, thread_id: str, path: str) -> None:
    """Raise unless `path` is a directory of the thread (the root always is)."""
    if path == ROOT:
        return
    row = get_row(connection, thread_id, path)
    if row is None:
        raise FileNotFoundError(f"no such directory in thread {thread_id!r}: {path}")
    if row["kind"] != "dir":
        raise not_a_directory(thread_id, path)


def require_file(connection: Connection, thread_id: str, path: str) -> RowMapping:
    """The row of a file of the thread; raise naming the path when it is not one."""
    row = get_row(connection, thread_id, path)
    if row is None:
        if path == ROOT:
            raise is_a_directory(thread_id, path)
        raise not_found(thread_id, path)
    if row["kind"] != "file":
        raise is_a_directory(thread_id, path)
    return row


def not_found(thread_id: str, path: str) -> FileNotFoundError:
    """The error for a missing file, naming the thread and its path."""
    return FileNotFoundError(f"no such file in thread {thread_id!r}: {path}")


def is_a_directory(thread_id: str, path: str) -> IsADirectoryError:
    """The error for a directory where a file is needed."""
    return IsADirectoryError(f"{path} is a directory in thread {thread_id!r}")


def not_a_directory(thread_id: str, path: str) -> NotADirectoryError:
    """The error for a file where a directory is needed."""
    return NotADirectoryError(f"{path} is a file in thread {thread_id!r}, not a directory")
