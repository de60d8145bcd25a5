"""ThreadState's file API: each thread's own filesystem, backed by the store.

Paths are the thread's own (`/attachments/report.pdf`); the same path in another thread
is another file. Errors are Python's: FileNotFoundError, IsADirectoryError,
NotADirectoryError, FileExistsError, `DirectoryNotEmptyError` (an OSError) and
`InvalidPathError` (a ValueError), each naming the thread and path. Caps are documented in
`store/files.py`.
"""

from __future__ import annotations

from weft.activities.thread_scope import ThreadScope
from weft.store.files import FileStat, GrepMatch


class ThreadFiles:
    """File methods of ThreadState (`write_file`, `read_file`, …); see the store's files."""

    def __init__(self, scope: ThreadScope) -> None:
        self._scope = scope
        self._files = scope.store.files
        self._thread_id = scope.thread_id

    async def write_file(
        self, path: str, content: bytes | str, *, mime_type: str | None = None
    ) -> FileStat:
        """Create or replace a file (text is stored as UTF-8), creating missing parents."""
        return await self._scope.write(
            self._files.write_file, self._thread_id, path, content, mime_type=mime_type
        )

    async def read_file(self, path: str, *, encoding: str | None = None) -> bytes | str:
        """A file's bytes, or its text when `encoding` is given."""
        data = await self._scope.read(self._files.read_file, self._thread_id, path)
        return data if encoding is None else data.decode(encoding)

    async def stat_file(self, path: str) -> FileStat | None:
        """A file's or directory's kind, size, type and times; None when nothing is there."""
        return await self._scope.read(self._files.stat_file, self._thread_id, path)

    async def readdir_file(self, path: str = "/") -> list[FileStat]:
        """The entries directly inside a directory, sorted by name."""
        return await self._scope.read(self._files.readdir, self._thread_id, path)

    async def unlink_file(self, path: str) -> None:
        """Remove a file."""
        await self._scope.write(self._files.unlink, self._thread_id, path)

    async def mkdir_file(self, path: str, *, parents: bool = True) -> FileStat:
        """Create a directory; by default with its parents, and an existing one is fine."""
        return await self._scope.write(self._files.mkdir, self._thread_id, path, parents=parents)

    async def rmdir_file(self, path: str, *, recursive: bool = False) -> None:
        """Remove an empty directory, or with `recursive` everything below it too."""
        await self._scope.write(self._files.rmdir, self._thread_id, path, recursive=recursive)

    async def find_files(self, pattern: str) -> list[str]:
        """Paths matching a glob: `*.png` matches names anywhere, `/img/**` whole paths."""
        return await self._scope.read(self._files.find, self._thread_id, pattern)

    async def grep_files(
        self, pattern: str, path_glob: str | None = None, *, max_matches: int = 1000
    ) -> list[GrepMatch]:
        """Lines of the thread's text files matching a regex, optionally of some paths."""
        return await self._scope.read(
            self._files.grep, self._thread_id, pattern, path_glob, max_matches=max_matches
        )
