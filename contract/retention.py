"""Retention: closed threads deleted once they are older than a TTL (docs/deletion.md).

A TTL is set per agent (`retention: {closedThreadsTtl: 30d}` in its definition) and per
tenant (`weft retention set --tenant T --ttl 90d`, kept in the store). The shorter of the
two applies: a closed thread expires once either its agent's or its tenant's TTL has
passed since it closed. A thread with neither is kept.

The `RetentionSweep` workflow finds expired threads and deletes each through the deletion
machinery, its children with it; a Temporal Schedule (`weft-retention`) runs it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from pydantic import Field, field_validator

from weft.contract.wire import CamelModel

RETENTION_WORKFLOW_TYPE = "RetentionSweep"
# Stable activity names: renaming one breaks replay of running sweeps.
ACTIVITY_RETENTION_FIND = "retention.find"
ACTIVITY_RETENTION_DELETE = "retention.delete"
# The schedule's id, and the audit log's subject of each deletion a sweep makes.
RETENTION_SCHEDULE_ID = "weft-retention"
RETENTION_SUBJECT = "retention"

# One second to ten years: a shorter TTL is a typo, a longer one no retention at all.
MIN_TTL = timedelta(seconds=1)
MAX_TTL = timedelta(days=3650)

_TTL_PART = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_ttl(text: str, *, what: str = "ttl") -> timedelta:
    """`90d`, `12h`, `30m`, `1d12h`… as a timedelta; ValueError naming `what` otherwise."""
    if not isinstance(text, str):
        raise ValueError(f"{what}: a duration such as 30d, 12h or 1d12h, not {text!r}")
    compact = text.strip().lower()
    parts = _TTL_PART.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ValueError(
            f"{what} {text!r}: use a number and a unit (s, m, h or d), e.g. 30d, 12h or 1d12h"
        )
    ttl = timedelta(seconds=sum(int(number) * _UNIT_SECONDS[unit] for number, unit in parts))
    if not MIN_TTL <= ttl <= MAX_TTL:
        raise ValueError(f"{what} {text!r}: between 1s and 3650d")
    return ttl


def format_ttl(ttl: timedelta) -> str:
    """A TTL as `parse_ttl` reads it, largest units first (`1d12h`)."""
    seconds = int(ttl.total_seconds())
    parts = []
    for unit in ("d", "h", "m", "s"):
        count, seconds = divmod(seconds, _UNIT_SECONDS[unit])
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def shorter(a: timedelta | None, b: timedelta | None) -> timedelta | None:
    """The TTL in force given an agent's and a tenant's: the shorter; None when neither."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


class RetentionPolicy(CamelModel):
    """An agent's retention (`retention:` in its definition)."""

    closed_threads_ttl: str = Field(
        description="how long a closed thread of this agent is kept after it closed: 30d, 12h"
    )

    @field_validator("closed_threads_ttl")
    @classmethod
    def _ttl(cls, value: str) -> str:
        parse_ttl(value, what="duration")
        return value

    def ttl(self) -> timedelta:
        return parse_ttl(self.closed_threads_ttl)


class SweepCursor(CamelModel):
    """Where the next batch starts: after this close time and thread id."""

    closed_at: datetime
    thread_id: str


class RetentionFindInput(CamelModel):
    """The next expired threads as of `now`, after `cursor`."""

    now: datetime
    cursor: SweepCursor | None = None
    limit: int = Field(default=50, ge=1, le=1000)


class ExpiredThread(CamelModel):
    """A closed thread past its TTL: why it expired, and when it closed."""

    thread_id: str
    agent: str
    tenant: str
    closed_at: datetime
    ttl_seconds: float


class RetentionBatch(CamelModel):
    """What `retention.find` returns: expired threads in close order, and the cursor after
    them (None when there were none)."""

    threads: list[ExpiredThread] = Field(default_factory=list)
    cursor: SweepCursor | None = None


class RetentionDeleteInput(CamelModel):
    """Delete one expired thread and its children."""

    thread: ExpiredThread
    grace_seconds: float = Field(default=30.0, ge=0)


class RetentionDeleted(CamelModel):
    """One expired thread's deletion: the threads deleted (children first), or why not."""

    thread_id: str
    deleted: list[str] = Field(default_factory=list)
    gone: bool = Field(default=False, description="deleted by someone else before the sweep")
    error: str | None = None


class RetentionSweepInput(CamelModel):
    """A sweep's start (and, carried across continue-as-new, its progress)."""

    now: datetime | None = Field(
        default=None, description="the sweep's clock (default: when it starts)"
    )
    batch_size: int = Field(default=50, ge=1, le=1000)
    batches_per_run: int = Field(default=20, ge=1, le=1000)
    parallel: int = Field(default=4, ge=1, le=32)
    grace_seconds: float = Field(default=30.0, ge=0)
    cursor: SweepCursor | None = None
    run: int = Field(default=1, ge=1)
    deleted: int = Field(default=0, ge=0)
    expired: int = Field(default=0, ge=0)
    gone: int = Field(default=0, ge=0)
    failures: int = Field(default=0, ge=0)
    failed: list[RetentionDeleted] = Field(default_factory=list)
    deleted_ids: list[str] = Field(default_factory=list)


# How many deleted ids and failures a result names (the counts are always whole).
RESULT_ID_LIMIT = 100


class RetentionSweepResult(CamelModel):
    """What a sweep did: the threads it deleted (children included), those gone already,
    the failures (retried by the next sweep), as of `now`."""

    now: datetime
    runs: int
    expired: int
    deleted: int
    gone: int
    failures: int = 0
    failed: list[RetentionDeleted] = Field(
        default_factory=list, description=f"the first {RESULT_ID_LIMIT} failures"
    )
    deleted_ids: list[str] = Field(
        default_factory=list, description=f"the first {RESULT_ID_LIMIT} deleted"
    )


__all__ = [
    "ACTIVITY_RETENTION_DELETE",
    "ACTIVITY_RETENTION_FIND",
    "RESULT_ID_LIMIT",
    "RETENTION_SCHEDULE_ID",
    "RETENTION_SUBJECT",
    "RETENTION_WORKFLOW_TYPE",
    "ExpiredThread",
    "RetentionBatch",
    "RetentionDeleteInput",
    "RetentionDeleted",
    "RetentionFindInput",
    "RetentionPolicy",
    "RetentionSweepInput",
    "RetentionSweepResult",
    "SweepCursor",
    "format_ttl",
    "parse_ttl",
    "shorter",
]
