"""Thread filesystems (Runtime §8, §15) and the content-addressed blobs under them.

Each thread has its own tree of files and directories; `thread_id` is part of every
lookup, so a path of one thread never resolves in another. File bytes live in `blobs`,
keyed by their sha256, and are never duplicated: copying a file, within a thread or to
another one, adds a `files` row pointing at the same blob.

Caps (weft's choice; exceeding one raises `StoreLimitError` or `InvalidPathError`):
- a file or blob holds at most `MAX_FILE_BYTES` (64 MiB);
- a path is at most 1024 characters (`MAX_PATH_CHARS`), a name at most 255;
- `grep` returns at most `max_matches` (1,000 by default) matches and skips files that
  are not UTF-8 text.

Directories exist explicitly (`mkdir`) and implicitly: writing a file creates its missing
parents. The root `/` always exists. Blobs are never deleted: unlinking a file removes its
row only, since other files, threads or queued messages may share the bytes.
"""

from __future__ import annotations

import errno
import hashlib
import mimetypes
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from pydantic import AwareDatetime, BaseModel
from sqlalchemy import Connection, RowMapping, delete, func, select

from activities.clock import now_iso
from activities.store.file_paths import (
    MAX_PATH_CHARS,
    ROOT,
    InvalidPathError,
    ancestors,
    child_prefix,
    glob_matcher,
    join,
    normalize_path,
    numbered,
    parent_of,
)
from activities.store.kv import StoreLimitError
from activities.store.rows import event_to_row
from activities.store.tables import blobs, events, files
from contract.events import Event

if TYPE_CHECKING:
    from activities.store.store import Store

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PATH_CHARS",
    "DirectoryNotEmptyError",
    "FileStat",
    "FileStore",
    "GrepMatch",
    "InvalidPathError",
]

MAX_FILE_BYTES = 64 * 1024 * 1024
# Alternatives tried for a taken name during a copy before giving up.
_MAX_SUFFIX = 10_000


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


class GrepMatch(BaseModel):
    """One line of a file matching a `grep` pattern (lines count from 1)."""

    path: str
    line: int
    text: str


class FileStore:
    """Files and blobs over a `Store`'s engine; synchronous, one transaction per call."""

    def __init__(self, store: Store) -> None:
        # The store's write plumbing (BEGIN IMMEDIATE on SQLite, per-thread advisory locks
        # on PostgreSQL, retries of lost races) is shared, not re-implemented.
        self._store = store
        self._engine = store.engine

    # -- blobs ----------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        """Store `data` once under its sha256 (hex) and return the digest."""
        digest = _check_size(data, "blob")
        with self._store._write() as connection:
            self._put_blob(connection, digest, data)
        return digest

    def get_blob(self, digest: str) -> bytes | None:
        """The bytes stored under `digest`, or None."""
        with self._engine.connect() as connection:
            data: bytes | None = connection.scalar(
                select(blobs.c.data).where(blobs.c.digest == digest)
            )
        return None if data is None else bytes(data)

    # -- files ----------------------------------------------------------------------------

    def write_file(
        self, thread_id: str, path: str, content: bytes | str, *, mime_type: str | None = None
    ) -> FileStat:
        """Create or replace a file, creating its missing parent directories."""
        path = normalize_path(path)
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        digest = _check_size(data, f"file {path}")
        if path == ROOT:
            raise IsADirectoryError(f"{path} is a directory in thread {thread_id!r}")
        mime = mime_type or mimetypes.guess_type(path)[0]

        def write() -> FileStat:
            now = datetime.now(UTC)
            with self._store._write() as connection:
                self._store._lock_thread(connection, thread_id)
                self._make_parents(connection, thread_id, path, now)
                current = _row(connection, thread_id, path)
                if current is not None and current["kind"] == "dir":
                    raise IsADirectoryError(f"{path} is a directory in thread {thread_id!r}")
                self._put_blob(connection, digest, data)
                values = {"blob_digest": digest, "size": len(data), "mime_type": mime}
                if current is None:
                    connection.execute(
                        files.insert().values(
                            thread_id=thread_id,
                            path=path,
                            kind="file",
                            created_at=now,
                            updated_at=now,
                            **values,
                        )
                    )
                else:
                    connection.execute(
                        files.update()
                        .where(files.c.thread_id == thread_id, files.c.path == path)
                        .values(updated_at=now, **values)
                    )
                row = _row(connection, thread_id, path)
            assert row is not None
            return _stat(row)

        return self._store._retrying(write)

    def read_file(self, thread_id: str, path: str) -> bytes:
        """The bytes of a file; FileNotFoundError or IsADirectoryError name the path."""
        path = normalize_path(path)
        with self._engine.connect() as connection:
            row = _row(connection, thread_id, path)
            if row is None:
                if path == ROOT:
                    raise IsADirectoryError(f"{path} is a directory in thread {thread_id!r}")
                raise _not_found(thread_id, path)
            if row["kind"] == "dir":
                raise IsADirectoryError(f"{path} is a directory in thread {thread_id!r}")
            data: bytes | None = connection.scalar(
                select(blobs.c.data).where(blobs.c.digest == row["blob_digest"])
            )
        if data is None:
            raise FileNotFoundError(
                f"the bytes of {path} in thread {thread_id!r} are missing "
                f"(blob {row['blob_digest']})"
            )
        return bytes(data)

    def stat_file(self, thread_id: str, path: str) -> FileStat | None:
        """What is known about a file or directory, or None when nothing is there."""
        path = normalize_path(path)
        if path == ROOT:
            return FileStat(path=ROOT, name="", kind="dir", size=0)
        with self._engine.connect() as connection:
            row = _row(connection, thread_id, path)
        return None if row is None else _stat(row)

    def readdir(self, thread_id: str, path: str = ROOT) -> list[FileStat]:
        """The entries directly inside a directory, sorted by name."""
        path = normalize_path(path)
        prefix = child_prefix(path)
        with self._engine.connect() as connection:
            self._require_dir(connection, thread_id, path)
            rows = connection.execute(
                select(files).where(files.c.thread_id == thread_id, _below(prefix))
            ).mappings()
            entries = [_stat(row) for row in rows if "/" not in row["path"][len(prefix) :]]
        return sorted(entries, key=lambda entry: entry.name)

    def unlink(self, thread_id: str, path: str) -> None:
        """Remove a file (not a directory); its blob stays for any other holder."""
        path = normalize_path(path)
        with self._store._write() as connection:
            row = _row(connection, thread_id, path)
            if row is None and path != ROOT:
                raise _not_found(thread_id, path)
            if row is None or row["kind"] == "dir":
                raise IsADirectoryError(f"{path} is a directory in thread {thread_id!r}; use rmdir")
            connection.execute(
                delete(files).where(files.c.thread_id == thread_id, files.c.path == path)
            )

    def mkdir(self, thread_id: str, path: str, *, parents: bool = False) -> FileStat:
        """Create a directory; with `parents`, also its missing parents, and an existing
        directory is fine (like `mkdir -p`)."""
        path = normalize_path(path)
        if path == ROOT:
            if parents:
                return FileStat(path=ROOT, name="", kind="dir", size=0)
            raise FileExistsError(f"{path} already exists in thread {thread_id!r}")

        def write() -> FileStat:
            now = datetime.now(UTC)
            with self._store._write() as connection:
                self._store._lock_thread(connection, thread_id)
                current = _row(connection, thread_id, path)
                if current is not None and (current["kind"] == "file" or not parents):
                    raise FileExistsError(f"{path} already exists in thread {thread_id!r}")
                if parents:
                    self._make_parents(connection, thread_id, path, now)
                else:
                    self._require_dir(connection, thread_id, parent_of(path))
                if current is None:
                    connection.execute(files.insert().values(_dir_row(thread_id, path, now)))
                row = _row(connection, thread_id, path)
            assert row is not None
            return _stat(row)

        return self._store._retrying(write)

    def rmdir(self, thread_id: str, path: str, *, recursive: bool = False) -> None:
        """Remove an empty directory; with `recursive`, everything below it too."""
        path = normalize_path(path)
        if path == ROOT:
            raise InvalidPathError(path, "the root directory cannot be removed")
        with self._store._write() as connection:
            self._store._lock_thread(connection, thread_id)
            self._require_dir(connection, thread_id, path)
            below = (files.c.thread_id == thread_id) & _below(child_prefix(path))
            if not recursive:
                count = connection.scalar(select(func.count()).select_from(files).where(below))
                if count:
                    raise DirectoryNotEmptyError(
                        f"{path} in thread {thread_id!r} is not empty ({count} entries)"
                    )
            connection.execute(delete(files).where(below))
            connection.execute(
                delete(files).where(files.c.thread_id == thread_id, files.c.path == path)
            )

    def find(self, thread_id: str, pattern: str) -> list[str]:
        """Paths of files and directories matching a glob (see `glob_matcher`), sorted."""
        matcher = glob_matcher(pattern)
        query = select(files.c.path).where(files.c.thread_id == thread_id)
        with self._engine.connect() as connection:
            paths = connection.scalars(query).all()
        return sorted(path for path in paths if matcher.match(path))

    def grep(
        self,
        thread_id: str,
        pattern: str,
        path_glob: str | None = None,
        *,
        max_matches: int = 1000,
    ) -> list[GrepMatch]:
        """Lines of the thread's text files matching a regex, by path then line number."""
        try:
            regex = re.compile(pattern)
        except re.error as error:
            raise ValueError(f"invalid grep pattern {pattern!r}: {error}") from None
        matcher = glob_matcher(path_glob) if path_glob else None
        query = (
            select(files.c.path, files.c.blob_digest)
            .where(files.c.thread_id == thread_id, files.c.kind == "file")
            .order_by(files.c.path)
        )
        matches: list[GrepMatch] = []
        with self._engine.connect() as connection:
            candidates = [
                (str(row.path), str(row.blob_digest))
                for row in connection.execute(query)
                if matcher is None or matcher.match(row.path)
            ]
            for path, digest in sorted(candidates):
                data = connection.scalar(select(blobs.c.data).where(blobs.c.digest == digest))
                try:
                    text = bytes(data or b"").decode("utf-8")
                except UnicodeDecodeError:
                    continue  # binary files are not searched
                for number, line in enumerate(text.splitlines(), 1):
                    if regex.search(line):
                        matches.append(GrepMatch(path=path, line=number, text=line))
                        if len(matches) >= max_matches:
                            return matches
        return matches

    # -- copies between threads (Runtime §8) ---------------------------------------------

    def copy_files(
        self,
        source_thread_id: str,
        target_thread_id: str,
        paths: Sequence[str],
        *,
        target_dir: str = "/attachments",
        copy_id: str,
    ) -> list[str]:
        """Copy files into `target_dir` of the target thread; return the new paths in order.

        Each file keeps its base name; a taken name becomes `name-1.ext`, `name-2.ext`, ….
        Only rows are written: the target files point at the source files' blobs.

        Idempotent by `copy_id`. The names a copy picks depend on what the target held
        before it, so a retry cannot recompute them (its own first attempt took them).
        Instead the copy records an `artifact.changed` event in the target thread whose
        event id is derived from `copy_id`, carrying the chosen paths, in the same
        transaction as the rows. A retry finds that event and returns its paths without
        writing anything; a failed attempt committed nothing, so its retry starts afresh.
        """
        sources = [normalize_path(path) for path in paths]
        directory = normalize_path(target_dir)
        marker_id = f"files.copy:{copy_id}"

        def copy() -> list[str]:
            now = datetime.now(UTC)
            with self._store._write() as connection:
                self._store._lock_thread(connection, target_thread_id)
                done = connection.scalar(
                    select(events.c.data).where(
                        events.c.thread_id == target_thread_id, events.c.event_id == marker_id
                    )
                )
                if done is not None:
                    return list(done["payload"]["paths"])
                rows = [self._source_file(connection, source_thread_id, p) for p in sources]
                self._make_parents(connection, target_thread_id, join(directory, "x"), now)
                taken: set[str] = set()
                targets: list[str] = []
                for row in rows:
                    target = self._free_name(connection, target_thread_id, directory, row, taken)
                    taken.add(target)
                    targets.append(target)
                    connection.execute(
                        files.insert().values(
                            thread_id=target_thread_id,
                            path=target,
                            kind="file",
                            blob_digest=row["blob_digest"],
                            size=row["size"],
                            mime_type=row["mime_type"],
                            created_at=now,
                            updated_at=now,
                        )
                    )
                marker = Event(
                    type="artifact.changed",
                    event_id=marker_id,
                    timestamp=now_iso(),
                    thread_id=target_thread_id,
                    payload={
                        "change": "files.copied",
                        "copyId": copy_id,
                        "sourceThreadId": source_thread_id,
                        "sources": sources,
                        "paths": targets,
                    },
                )
                last = connection.scalar(
                    select(func.max(events.c.sequence)).where(
                        events.c.thread_id == target_thread_id
                    )
                )
                stored = marker.model_copy(update={"sequence": int(last or 0) + 1})
                connection.execute(events.insert().values(event_to_row(stored)))
            return targets

        return self._store._retrying(copy)

    # -- plumbing -------------------------------------------------------------------------

    def _put_blob(self, connection: Connection, digest: str, data: bytes) -> None:
        # Ask first: re-sending megabytes only for ON CONFLICT to drop them is wasteful.
        if connection.scalar(select(blobs.c.digest).where(blobs.c.digest == digest)):
            return
        statement = self._store._insert(blobs).values(
            digest=digest, size=len(data), data=data, created_at=datetime.now(UTC)
        )
        connection.execute(statement.on_conflict_do_nothing(index_elements=["digest"]))

    def _make_parents(
        self, connection: Connection, thread_id: str, path: str, now: datetime
    ) -> None:
        """Create the missing directories above `path`; a file in the way is an error."""
        above = ancestors(path)
        if not above:
            return
        existing = {
            row["path"]: row["kind"]
            for row in connection.execute(
                select(files.c.path, files.c.kind).where(
                    files.c.thread_id == thread_id, files.c.path.in_(above)
                )
            ).mappings()
        }
        for directory in above:
            kind = existing.get(directory)
            if kind == "file":
                raise NotADirectoryError(
                    f"{directory} is a file in thread {thread_id!r}, not a directory"
                )
            if kind is None:
                connection.execute(files.insert().values(_dir_row(thread_id, directory, now)))

    def _require_dir(self, connection: Connection, thread_id: str, path: str) -> None:
        if path == ROOT:
            return
        row = _row(connection, thread_id, path)
        if row is None:
            raise FileNotFoundError(f"no such directory in thread {thread_id!r}: {path}")
        if row["kind"] != "dir":
            raise NotADirectoryError(f"{path} is a file in thread {thread_id!r}, not a directory")

    def _source_file(self, connection: Connection, thread_id: str, path: str) -> RowMapping:
        row = _row(connection, thread_id, path)
        if row is None:
            raise _not_found(thread_id, path)
        if row["kind"] != "file":
            raise IsADirectoryError(f"{path} is a directory in thread {thread_id!r}")
        return row

    def _free_name(
        self,
        connection: Connection,
        thread_id: str,
        directory: str,
        source: RowMapping,
        taken: set[str],
    ) -> str:
        name = source["path"].rsplit("/", 1)[-1]
        for n in range(_MAX_SUFFIX):
            candidate = join(directory, numbered(name, n) if n else name)
            if candidate not in taken and _row(connection, thread_id, candidate) is None:
                return normalize_path(candidate)  # checks the length of the new name
        raise StoreLimitError(
            "max_name_suffix", f"no free name for {name} in {directory} of thread {thread_id!r}"
        )


def _check_size(data: bytes, what: str) -> str:
    if len(data) > MAX_FILE_BYTES:
        raise StoreLimitError(
            "max_file_bytes",
            f"{what} is {len(data)} bytes; the limit max_file_bytes is {MAX_FILE_BYTES}",
        )
    return hashlib.sha256(data).hexdigest()


def _row(connection: Connection, thread_id: str, path: str) -> RowMapping | None:
    query = select(files).where(files.c.thread_id == thread_id, files.c.path == path)
    return connection.execute(query).mappings().first()


def _below(prefix: str) -> Any:
    """Paths strictly below `prefix`, compared exactly: LIKE is case-blind on SQLite."""
    return (func.length(files.c.path) > len(prefix)) & (
        func.substr(files.c.path, 1, len(prefix)) == prefix
    )


def _dir_row(thread_id: str, path: str, now: datetime) -> dict[str, Any]:
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


def _stat(row: RowMapping) -> FileStat:
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


def _not_found(thread_id: str, path: str) -> FileNotFoundError:
    return FileNotFoundError(f"no such file in thread {thread_id!r}: {path}")
