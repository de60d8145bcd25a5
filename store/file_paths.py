"""Paths and glob patterns of thread filesystems: normalisation, validation, matching.

A path is absolute and POSIX-like (`/attachments/report.pdf`). `.` segments, repeated
and trailing slashes are dropped; a relative path is taken from the root. `..`, NUL and
over-long paths or names are refused with `InvalidPathError`, which names the path.
"""

from __future__ import annotations

import posixpath
import re
from functools import lru_cache

ROOT = "/"
# The `files.path` column holds 1024 characters.
MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255


class InvalidPathError(ValueError):
    """A path a thread filesystem cannot hold; the message names the path and why."""

    def __init__(self, path: object, reason: str) -> None:
        shown = repr(path) if len(repr(path)) <= 120 else repr(path)[:100] + "…"
        super().__init__(f"invalid file path {shown}: {reason}")
        self.path = path


def normalize_path(path: str) -> str:
    """The canonical form of `path`: absolute, no empty, `.` or trailing segments."""
    if not isinstance(path, str):
        raise InvalidPathError(path, f"a path must be a string, not {type(path).__name__}")
    if not path.strip():
        raise InvalidPathError(path, "the path is empty")
    if "\x00" in path:
        raise InvalidPathError(path, "the path contains a NUL character")
    names = [name for name in path.split("/") if name not in ("", ".")]
    for name in names:
        if name == "..":
            raise InvalidPathError(path, "'..' is not allowed")
        if len(name) > MAX_NAME_CHARS:
            raise InvalidPathError(path, f"a name is longer than {MAX_NAME_CHARS} characters")
    normalized = ROOT + "/".join(names)
    if len(normalized) > MAX_PATH_CHARS:
        raise InvalidPathError(path, f"the path is longer than {MAX_PATH_CHARS} characters")
    return normalized


def parent_of(path: str) -> str:
    """The directory holding a normalized path (the root's parent is the root)."""
    return posixpath.dirname(path) or ROOT


def ancestors(path: str) -> list[str]:
    """The directories above a normalized path, outermost first, without the root."""
    found: list[str] = []
    parent = parent_of(path)
    while parent != ROOT:
        found.append(parent)
        parent = parent_of(parent)
    return found[::-1]


def child_prefix(directory: str) -> str:
    """What every path below `directory` starts with."""
    return directory if directory == ROOT else directory + "/"


def join(directory: str, name: str) -> str:
    """`name` inside a normalized directory."""
    return child_prefix(directory) + name


def numbered(name: str, n: int) -> str:
    """`report.pdf` → `report-1.pdf`: the n-th alternative for a taken name."""
    stem, ext = posixpath.splitext(name)
    return f"{stem}-{n}{ext}"


def glob_matcher(pattern: str) -> re.Pattern[str]:
    """A regex for a glob over whole paths.

    A pattern without `/` matches base names in any directory (like `find -name`); one
    with `/` matches whole paths from the root. `*` and `?` stay within one name, `**`
    spans directories, `[abc]` and `[!abc]` are character classes.
    """
    if not isinstance(pattern, str) or not pattern or "\x00" in pattern:
        raise ValueError(f"invalid glob pattern {pattern!r}")
    return _compiled(pattern)


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    if "/" not in pattern:
        return re.compile(r"(?:.*/)?" + _translate(pattern) + r"\Z", re.DOTALL)
    rooted = pattern if pattern.startswith("/") else "/" + pattern
    return re.compile(_translate(rooted) + r"\Z", re.DOTALL)


def _translate(pattern: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append(r"(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(r".*")
            i += 2
        elif char == "*":
            out.append(r"[^/]*")
            i += 1
        elif char == "?":
            out.append(r"[^/]")
            i += 1
        elif char == "[" and (end := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : end]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append("[" + ("^/" if negate else "") + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return "".join(out)
