"""`find` and `grep` over one thread's filesystem (globs from `file_paths.glob_matcher`)."""

from __future__ import annotations

import re

from pydantic import BaseModel
from sqlalchemy import Connection, select

from weft.store.file_paths import glob_matcher
from weft.store.tables import blobs, files


class GrepMatch(BaseModel):
    """One line of a file matching a `grep` pattern (lines count from 1)."""

    path: str
    line: int
    text: str


def find_paths(connection: Connection, thread_id: str, pattern: str) -> list[str]:
    """Paths of the thread's files and directories matching a glob, sorted."""
    matcher = glob_matcher(pattern)
    query = select(files.c.path).where(files.c.thread_id == thread_id)
    return sorted(path for path in connection.scalars(query) if matcher.match(path))


def grep_lines(
    connection: Connection,
    thread_id: str,
    pattern: str,
    path_glob: str | None,
    max_matches: int,
) -> list[GrepMatch]:
    """Lines of the thread's UTF-8 files matching a regex, by path then line number.

    Files that are not UTF-8 text are skipped; at most `max_matches` are returned.
    """
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise ValueError(f"invalid grep pattern {pattern!r}: {error}") from None
    matcher = glob_matcher(path_glob) if path_glob else None
    query = select(files.c.path, files.c.blob_digest).where(
        files.c.thread_id == thread_id, files.c.kind == "file"
    )
    candidates = sorted(
        (str(row.path), str(row.blob_digest))
        for row in connection.execute(query)
        if matcher is None or matcher.match(row.path)
    )
    matches: list[GrepMatch] = []
    for path, digest in candidates:
        # One blob in memory at a time.
        data = connection.scalar(select(blobs.c.data).where(blobs.c.digest == digest))
        try:
            text = bytes(data or b"").decode("utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if regex.search(line):
                matches.append(GrepMatch(path=path, line=number, text=line))
                if len(matches) >= max_matches:
                    return matches
    return matches
