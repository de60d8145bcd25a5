"""Wall-clock timestamps for facts recorded by activities."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso() -> str:
    """Current UTC time as ISO-8601 with milliseconds and a Z suffix."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now_micros() -> int:
    """Current time in microseconds since the epoch (the spec's message `created_at`)."""
    return int(datetime.now(UTC).timestamp() * 1_000_000)
