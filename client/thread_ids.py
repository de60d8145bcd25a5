"""Readable thread ids: `<agent>-<12 hex>`, for new threads and forks alike."""

from __future__ import annotations

import re
import uuid

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.\-]+")


def new_thread_id(agent: str) -> str:
    """A readable thread id, `<agent>-<12 hex>` (`helper-7f3a9c2e41b0`), so that lists such
    as the Temporal UI's tell threads apart by agent; 48 random bits keep ids of one agent
    apart well past a million threads."""
    return f"{thread_id_prefix(agent)}-{uuid.uuid4().hex[:12]}"


def thread_id_prefix(agent: str) -> str:
    """The agent part of a thread id: id-safe characters, starting with a letter or digit
    (the HTTP API's id pattern)."""
    return _NOT_IN_ID.sub("-", agent).lstrip("_.-")[:64] or "thread"
