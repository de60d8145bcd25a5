"""Validation and caps for the per-thread key-value store (Runtime spec §14).

Caps (spec §14.2 lets a runtime choose them; these are weft's):
- a key is a string of at most `MAX_KEY_CHARS` (256) characters;
- a value is at most `MAX_VALUE_BYTES` (1 MiB) once encoded as UTF-8 JSON;
- a thread holds at most `MAX_KEYS_PER_THREAD` (10,000) keys.

Exceeding a cap raises `StoreLimitError`, whose `limit` names the cap. Values must be
JSON: Python's `json` rules apply (tuples become arrays), and anything else, NaN or
infinity included, raises TypeError or ValueError naming the key.
"""

from __future__ import annotations

import json
from typing import Any

MAX_KEY_CHARS = 256
MAX_VALUE_BYTES = 1024 * 1024
MAX_KEYS_PER_THREAD = 10_000


class StoreLimitError(ValueError):
    """A write exceeded one of the store's documented caps; `limit` names which."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit


def check_key(key: str) -> None:
    """Reject keys that are not strings or are longer than the key cap."""
    if not isinstance(key, str):
        raise TypeError(f"kv key must be a string, got {type(key).__name__}")
    if len(key) > MAX_KEY_CHARS:
        raise StoreLimitError(
            "max_key_chars",
            f"kv key is {len(key)} characters; the limit max_key_chars is {MAX_KEY_CHARS}",
        )


def encode_value(key: str, value: Any) -> str:
    """The JSON text stored for `value`, after checking it is JSON and under the size cap."""
    try:
        encoded = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise type(error)(f"kv value for key {key!r} is not JSON-serializable: {error}") from None
    size = len(encoded.encode("utf-8"))
    if size > MAX_VALUE_BYTES:
        raise StoreLimitError(
            "max_value_bytes",
            f"kv value for key {key!r} is {size} bytes as JSON; "
            f"the limit max_value_bytes is {MAX_VALUE_BYTES}",
        )
    return encoded


def too_many_keys(thread_id: str) -> StoreLimitError:
    """The error raised when a new key would pass the per-thread key cap."""
    return StoreLimitError(
        "max_keys_per_thread",
        f"thread {thread_id!r} already holds {MAX_KEYS_PER_THREAD} keys; "
        f"the limit max_keys_per_thread is {MAX_KEYS_PER_THREAD}",
    )
