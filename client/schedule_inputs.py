"""What `weft schedule create` is given, checked and turned into Temporal's types.

Every problem is a `ScheduleError` naming the argument, so the CLI prints one line.
"""

from __future__ import annotations

import re
from datetime import timedelta

from pydantic import ValidationError
from temporalio.client import ScheduleIntervalSpec, ScheduleOverlapPolicy, ScheduleSpec

from weft.contract.messages import QueuedMessage
from weft.contract.validation import describe_validation_error


class ScheduleError(ValueError):
    """Bad schedule input, or a schedule weft cannot act on; the message names what is wrong."""


class ScheduleNotFound(ScheduleError):
    """No schedule has this name."""


class ScheduleExists(ScheduleError):
    """A schedule with this name exists already."""


# Temporal's own default is one year: a server down for a day would then fire every run it
# missed (with ALLOW_ALL, one new thread each). Ten minutes still covers a server restart
# around a 09:00 run, and drops anything older.
DEFAULT_CATCHUP_WINDOW = timedelta(minutes=10)
# Temporal silently raises a shorter catch-up window to 10s; refuse it instead.
MIN_CATCHUP_WINDOW = timedelta(seconds=10)
MIN_INTERVAL = timedelta(seconds=1)

OVERLAP_NAMES = tuple(policy.name.lower() for policy in ScheduleOverlapPolicy)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_DURATION_PART = re.compile(r"(\d+)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, *, what: str = "duration") -> timedelta:
    """`30s`, `5m`, `1h`, `2d` or combined (`1h30m`) as a timedelta."""
    compact = text.strip().lower()
    parts = _DURATION_PART.findall(compact)
    if not compact or "".join(number + unit for number, unit in parts) != compact:
        raise ScheduleError(
            f"unknown {what} {text!r}: use a number and a unit (s, m, h or d),"
            " e.g. 30s, 5m, 1h or 1h30m"
        )
    return timedelta(seconds=sum(int(number) * _UNIT_SECONDS[unit] for number, unit in parts))


def overlap_policy(value: ScheduleOverlapPolicy | str) -> ScheduleOverlapPolicy:
    """A policy from itself or its lower-case name (`skip`, `allow_all`, …)."""
    if isinstance(value, ScheduleOverlapPolicy):
        return value
    try:
        return ScheduleOverlapPolicy[value.strip().upper().replace("-", "_")]
    except KeyError:
        raise ScheduleError(
            f"unknown overlap policy {value!r}: choose one of {', '.join(OVERLAP_NAMES)}"
        ) from None


def overlap_or(
    value: ScheduleOverlapPolicy | str | None, default: ScheduleOverlapPolicy
) -> ScheduleOverlapPolicy:
    """`value` as a policy, or `default` when it is None."""
    return default if value is None else overlap_policy(value)


def check_name(name: str) -> None:
    """Refuse a name that would make an awkward schedule id or workflow id prefix."""
    if not _NAME.fullmatch(name):
        raise ScheduleError(
            f"invalid schedule name {name!r}: use letters, digits, '.', '_' or '-'"
            " (up to 200, starting with a letter or digit)"
        )


def schedule_spec(
    cron: str | None, every: timedelta | str | None, time_zone: str | None
) -> tuple[ScheduleSpec, str]:
    """The spec, and how it reads (kept in the memo)."""
    if cron is not None and every is None:
        if not cron.strip():
            raise ScheduleError("the cron expression is empty")
        spec = ScheduleSpec(cron_expressions=[cron], time_zone_name=time_zone)
        return spec, f'cron "{cron}" {time_zone or "UTC"}'
    if every is not None and cron is None:
        interval = checked_interval(every)
        text = every if isinstance(every, str) else f"{interval.total_seconds():g}s"
        spec = ScheduleSpec(intervals=[ScheduleIntervalSpec(every=interval)])
        return spec, f"every {text}"
    raise ScheduleError("give exactly one of a cron expression or an interval (every)")


def checked_interval(value: timedelta | str, *, what: str = "interval") -> timedelta:
    """An interval of at least `MIN_INTERVAL`; errors call it `what` (the CLI: `--every`)."""
    interval = parse_duration(value, what=what) if isinstance(value, str) else value
    if interval < MIN_INTERVAL:
        raise ScheduleError(f"{what} {_shown(value)} is below the minimum of 1s")
    return interval


def checked_catchup_window(
    value: timedelta | str | None, *, what: str = "catch-up window"
) -> timedelta:
    """The catch-up window: `value`, or `DEFAULT_CATCHUP_WINDOW` when None."""
    if value is None:
        return DEFAULT_CATCHUP_WINDOW
    window = parse_duration(value, what=what) if isinstance(value, str) else value
    if window < MIN_CATCHUP_WINDOW:
        raise ScheduleError(f"{what} {_shown(value)} is below Temporal's minimum of 10s")
    return window


def _shown(value: timedelta | str) -> str:
    """A duration as the caller wrote it: the text, or seconds for a timedelta."""
    return repr(value) if isinstance(value, str) else f"{value.total_seconds():g}s"


def scheduled_message(name: str, content: str) -> QueuedMessage:
    """The user message each run sends, marked with the schedule's name."""
    if not content.strip():
        raise ScheduleError("the message is empty")
    try:
        return QueuedMessage(role="user", content=content, metadata={"schedule": name})
    except ValidationError as err:
        raise ScheduleError(f"invalid message: {describe_validation_error(err)}") from None
