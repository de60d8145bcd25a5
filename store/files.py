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
parents. The root `/` always exists. Unlinking a file removes its row only, since other
files, threads or queued messages may share the bytes; a blob is deleted only with the last
thread that refers to it (store/deletion.py).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, delete, func, select

from weft.activities.clock import now_iso
from weft.contract.events import Event
from weft.store.database import Database
from weft.store.events import insert_events
from weft.store.file_paths import (
    MAX_PATH_CHARS,
    ROOT,
    InvalidPathError,
    child_prefix,
    join,
    normalize_path,
    numbered,
    parent_of,
)
from weft.store.file_rows import (
    MAX_FILE_BYTES,
    ROOT_STAT,
    DirectoryNotEmptyError,
    FileStat,
    below,
    digest_of,
    dir_row,
    get_row,
    is_a_directory,
    make_parents,
    require_dir,
    require_file,
    to_stat,
)
from weft.store.file_search import GrepMatch, find_paths, grep_lines
from weft.store.history import record_paths
from weft.store.kv import StoreLimitError
from weft.store.tables import ID_LENGTH, blobs, events, files

__all__ = [
    "MAX_FILE_BYTES",
    "MAX_PATH_CHARS",
    "DirectoryNotEmptyError",
    "FileStat",
    "FileStore",
    "GrepMatch",
    "InvalidPathError",
]

# Alternatives tried for a taken name during a copy before giving up.
_MAX_SUFFIX = 10_000


class FileStore:
    """Files and blobs over the store's database; synchronous, one transaction per call."""

    def __init__(self, database: Database) -> None:
        # The store's write rules (BEGIN IMMEDIATE on SQLite, per-thread advisory locks on
        # PostgreSQL, retries of lost races) are shared, not re-implemented.
        self._db = database

    # -- blobs ----------------------------------------------------------------------------

    def put_blob(self, data: bytes) -> str:
        """Store `data` once under its sha256 (hex) and return the digest."""
        digest = digest_of(data, "blob")
        with self._db.write() as connection:
            self._put_blob(connection, digest, data)
        return digest

    def get_blob(self, digest: str) -> bytes | None:
        """The bytes stored under `digest`, or None."""
        with self._db.read() as connection:
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
        digest = digest_of(data, f"file {path}")
        if path == ROOT:
            raise is_a_directory(thread_id, path)
        mime = mime_type or mimetypes.guess_type(path)[0]

        def write() -> FileStat:
            now = datetime.now(UTC)
            with self._db.write() as connection:
                self._db.lock_thread(connection, thread_id)
                make_parents(connection, thread_id, path, now)
                current = get_row(connection, thread_id, path)
                if current is not None and current["kind"] == "dir":
                    raise is_a_directory(thread_id, path)
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
                row = get_row(connection, thread_id, path)
                assert row is not None
                record_paths(connection, thread_id, [dict(row)])
            return to_stat(row)

        return self._db.retrying(write)

    def read_file(self, thread_id: str, path: str) -> bytes:
        """The bytes of a file; FileNotFoundError or IsADirectoryError name the path."""
        path = normalize_path(path)
        with self._db.read() as connection:
            row = require_file(connection, thread_id, path)
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
            return ROOT_STAT
        with self._db.read() as connection:
            row = get_row(connection, thread_id, path)
        return None if row is None else to_stat(row)

    def readdir(self, thread_id: str, path: str = ROOT) -> list[FileStat]:
        """The entries directly inside a directory, sorted by name."""
        path = normalize_path(path)
        prefix = child_prefix(path)
        with self._db.read() as connection:
            require_dir(connection, thread_id, path)
            rows = connection.execute(
                select(files).where(files.c.thread_id == thread_id, below(prefix))
            ).mappings()
            entries = [to_stat(row) for row in rows if "/" not in row["path"][len(prefix) :]]
        return sorted(entries, key=lambda entry: entry.name)

    def unlink(self, thread_id: str, path: str) -> None:
        """Remove a file (not a directory); its blob stays for any other holder."""
        path = normalize_path(path)
        with self._db.write() as connection:
            self._db.lock_thread(connection, thread_id)  # the history follows the events
            require_file(connection, thread_id, path)
            record_paths(connection, thread_id, [path])
            connection.execute(
                delete(files).where(files.c.thread_id == thread_id, files.c.path == path)
            )

    def mkdir(self, thread_id: str, path: str, *, parents: bool = False) -> FileStat:
        """Create a directory; with `parents`, also its missing parents, and an existing
        directory is fine (like `mkdir -p`)."""
        path = normalize_path(path)
        if path == ROOT:
            if parents:
                return ROOT_STAT
            raise FileExistsError(f"{path} already exists in thread {thread_id!r}")

        def write() -> FileStat:
            now = datetime.now(UTC)
            with self._db.write() as connection:
                self._db.lock_thread(connection, thread_id)
                current = get_row(connection, thread_id, path)
                if current is not None and (current["kind"] == "file" or not parents):
                    raise FileExistsError(f"{path} already exists in thread {thread_id!r}")
                if parents:
                    make_parents(connection, thread_id, path, now)
                else:
                    require_dir(connection, thread_id, parent_of(path))
                if current is None:
                    made = dir_row(thread_id, path, now)
                    connection.execute(files.insert().values(made))
                    record_paths(connection, thread_id, [made])
                row = get_row(connection, thread_id, path)
            assert row is not None
            return to_stat(row)

        return self._db.retrying(write)

    def rmdir(self, thread_id: str, path: str, *, recursive: bool = False) -> None:
        """Remove an empty directory; with `recursive`, everything below it too."""
        path = normalize_path(path)
        if path == ROOT:
            raise InvalidPathError(path, "the root directory cannot be removed")
        with self._db.write() as connection:
            self._db.lock_thread(connection, thread_id)
            require_dir(connection, thread_id, path)
            inside = (files.c.thread_id == thread_id) & below(child_prefix(path))
            if not recursive:
                count = connection.scalar(select(func.count()).select_from(files).where(inside))
                if count:
                    raise DirectoryNotEmptyError(
                        f"{path} in thread {thread_id!r} is not empty ({count} entries)"
                    )
            gone = list(connection.scalars(select(files.c.path).where(inside)))
            record_paths(connection, thread_id, [*gone, path])
            connection.execute(delete(files).where(inside))
            connection.execute(
                delete(files).where(files.c.thread_id == thread_id, files.c.path == path)
            )

    def find(self, thread_id: str, pattern: str) -> list[str]:
        """Paths of files and directories matching a glob (see `glob_matcher`), sorted."""
        with self._db.read() as connection:
            return find_paths(connection, thread_id, pattern)

    def grep(
        self,
        thread_id: str,
        pattern: str,
        path_glob: str | None = None,
        *,
        max_matches: int = 1000,
    ) -> list[GrepMatch]:
        """Lines of the thread's text files matching a regex, by path then line number."""
        with self._db.read() as connection:
            return grep_lines(connection, thread_id, pattern, path_glob, max_matches)

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
        if len(marker_id) > ID_LENGTH:
            raise StoreLimitError(
                "max_copy_id_chars", f"copy_id is {len(copy_id)} characters; too long for an id"
            )

        def copy() -> list[str]:
            now = datetime.now(UTC)
            with self._db.write() as connection:
                self._db.lock_thread(connection, target_thread_id)
                done = connection.scalar(
                    select(events.c.data).where(
                        events.c.thread_id == target_thread_id, events.c.event_id == marker_id
                    )
                )
                if done is not None:
                    return list(done["payload"]["paths"])
                rows = [require_file(connection, source_thread_id, p) for p in sources]
                make_parents(connection, target_thread_id, join(directory, "x"), now)
                taken: set[str] = set()
                targets: list[str] = []
                for row in rows:
                    name = row["path"].rsplit("/", 1)[-1]
                    target = _free_name(connection, target_thread_id, directory, name, taken)
                    taken.add(target)
                    targets.append(target)
                    copied = {**row, "path": target, "kind": "file"}
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
                    record_paths(connection, target_thread_id, [copied])
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
                # Numbered, stamped and announced like every other event.
                insert_events(self._db, connection, {target_thread_id: [marker]})
            return targets

        return self._db.retrying(copy)

    # -- plumbing -------------------------------------------------------------------------

    def _put_blob(self, connection: Connection, digest: str, data: bytes) -> None:
        # Ask first: re-sending megabytes only for ON CONFLICT to drop them is wasteful.
        # On PostgreSQL the reused blob is share-locked until this write commits, so a
        # thread's deletion counting its references sees this file (store/deletion.py).
        found = select(blobs.c.digest).where(blobs.c.digest == digest)
        if self._db.postgres:
            found = found.with_for_update(read=True)
        if connection.scalar(found):
            return
        statement = self._db.insert_ignoring_duplicates(blobs, ["digest"]).values(
            digest=digest, size=len(data), data=data, created_at=datetime.now(UTC)
        )
        connection.execute(statement)


def _free_name(
    connection: Connection, thread_id: str, directory: str, name: str, taken: set[str]
) -> str:
    """`name` in `directory`, or the first `name-N.ext` that is not taken."""
    for n in range(_MAX_SUFFIX):
        candidate = join(directory, numbered(name, n) if n else name)
        if candidate not in taken and get_row(connection, thread_id, candidate) is None:
            return normalize_path(candidate)  # checks the length of the new name
    raise StoreLimitError(
        "max_name_suffix", f"no free name for {name} in {directory} of thread {thread_id!r}"
    )
