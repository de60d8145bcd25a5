"""The shape of a generated thread id, `<agent>-<12 hex>`: pure, so the client and the
workflow (a subagent's id) make the same ids from their own source of randomness."""

from __future__ import annotations

import re

_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_.\-]+")
# 48 random bits keep ids of one agent apart well past a million threads.
ID_HEX_DIGITS = 12


def thread_id(agent: str, hex_digits: str) -> str:
    """`<agent>-<12 hex>` (`helper-7f3a9c2e41b0`) from the first 12 of `hex_digits`, so that
    lists such as the Temporal UI's tell threads apart by agent."""
    return f"{thread_id_prefix(agent)}-{hex_digits[:ID_HEX_DIGITS]}"


def thread_id_prefix(agent: str) -> str:
    """The agent part of a thread id: id-safe characters, starting with a letter or digit
    (the HTTP API's id pattern)."""
    return _NOT_IN_ID.sub("-", agent).lstrip("_.-")[:64] or "thread"
