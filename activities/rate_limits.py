"""Rate limits shared by every worker: what a limit is, and waiting for a place in it.

A `RateLimit` caps the requests and tokens per minute of one key (a provider's name unless
it names another), counted over a window (a minute unless shortened). `RateLimiter`
reserves a place in the key's window in the store (store/rate_limits.py) before a request
is sent, waits for it inside the activity while heartbeating, settles the reply's usage,
and blocks the key for a 429's Retry-After, so every worker on the store slows down.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel
from temporalio import activity

from weft.activities.providers.errors import rate_limit_wait_over_budget, rate_limited_by_weft
from weft.contract.validation import describe_validation_error
from weft.store.rate_limit_window import WindowLimit
from weft.store.rate_limits import RateLimits

# How long a request may wait for its place, asked only when it has to wait: the seconds
# left of its turn's wall-time budget, or None when nothing bounds the wait.
WaitAllowance = Callable[[], Awaitable[float | None]]

_PART = re.compile(r"^\s*(\d+)\s*(rpm|tpm)\s*$", re.IGNORECASE)
# A waiting call heartbeats this often, so Temporal knows its worker is alive.
_BEAT_SECONDS = 1.0


class RateLimit(BaseModel):
    """Requests and tokens per minute for one key, e.g. `{requestsPerMinute: 500}`."""

    model_config = ConfigDict(
        alias_generator=to_camel, validate_by_name=True, extra="forbid", frozen=True
    )

    requests_per_minute: int | None = Field(default=None, ge=1)
    tokens_per_minute: int | None = Field(default=None, ge=1)
    window_seconds: float = Field(
        default=60,
        gt=0,
        le=3600,
        description="the window the limit is counted over; the per-minute figures are "
        "scaled to it (a window of 10 s admits a sixth of them in any 10 s)",
    )
    key: str | None = Field(
        default=None,
        min_length=1,
        description="the key the limit is shared under; the provider's name when unset "
        "(two providers on one account name the same key)",
    )

    @model_validator(mode="after")
    def _caps_something(self) -> RateLimit:
        if self.requests_per_minute is None and self.tokens_per_minute is None:
            raise ValueError("a rate limit needs requestsPerMinute, tokensPerMinute or both")
        return self

    @classmethod
    def parse(cls, text: str, *, key: str | None = None) -> RateLimit:
        """`500rpm`, `200000tpm` or both, comma-separated (`500rpm,200000tpm`)."""
        fields: dict[str, int] = {}
        for part in text.split(","):
            match = _PART.match(part)
            if match is None:
                raise ValueError(
                    f"rate limit {text!r}: each part is a number and rpm or tpm, "
                    f"e.g. 500rpm,200000tpm; {part.strip()!r} is neither"
                )
            name = "requests_per_minute" if match[2].lower() == "rpm" else "tokens_per_minute"
            if name in fields:
                raise ValueError(f"rate limit {text!r}: {match[2].lower()} is given twice")
            fields[name] = int(match[1])
        try:
            return cls.model_validate({**fields, "key": key})
        except ValidationError as err:
            raise ValueError(f"rate limit {text!r}: {describe_validation_error(err)}") from None

    def window(self) -> WindowLimit:
        """The caps within one window, never below one request or token."""
        share = self.window_seconds / 60

        def scaled(per_minute: int | None) -> int | None:
            return None if per_minute is None else max(1, math.floor(per_minute * share))

        return WindowLimit(
            requests=scaled(self.requests_per_minute),
            tokens=scaled(self.tokens_per_minute),
            window_seconds=self.window_seconds,
        )


def parse_keyed_rate(text: str) -> tuple[str, RateLimit]:
    """`openai=500rpm,200000tpm`: a key and its limit."""
    key, sep, spec = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"rate limit {text!r}: write KEY=LIMITS, e.g. openai=500rpm,200000tpm")
    return key.strip(), RateLimit.parse(spec, key=key.strip())


@dataclass(frozen=True)
class Admission:
    """A request admitted on `key`: its grant, and how long it waited for it."""

    key: str
    grant_id: str
    waited_seconds: float


class RateLimiter:
    """Admits requests under the limits every worker on the store shares."""

    def __init__(self, limits: RateLimits) -> None:
        self._limits = limits

    async def admit(
        self,
        key: str,
        limit: RateLimit,
        tokens: int,
        *,
        wait_allowance: WaitAllowance | None = None,
    ) -> Admission:
        """Wait for a place for one request of `tokens` on `key`.

        Raises the non-retryable `RateLimitWaitTooLong` when the wait is longer than
        `wait_allowance` allows (the workflow then takes the model's fallback), and a
        retryable `ProviderRateLimited` with the wait as its retry delay when the wait would
        take more than half of what is left of this activity attempt (Temporal then waits,
        holding no worker slot).
        """
        window = limit.window()
        waited = 0.0
        while True:
            reservation = await asyncio.to_thread(
                self._limits.reserve, key, window, tokens, max_delay=_attempt_room()
            )
            delay, grant_id = reservation.delay_seconds, reservation.grant_id
            if delay > 0 and wait_allowance is not None:
                allowed = await wait_allowance()
                if allowed is not None and delay > allowed:
                    if grant_id is not None:
                        await asyncio.to_thread(self._limits.release, grant_id)
                    raise rate_limit_wait_over_budget(key, delay, allowed)
            if grant_id is None:
                raise rate_limited_by_weft(key, delay)
            if delay <= 0:
                return Admission(key, grant_id, waited)
            await self._wait_or_release(grant_id, delay)
            waited += delay
            if await asyncio.to_thread(self._limits.blocked_for, key) <= 0:
                return Admission(key, grant_id, waited)
            # A 429 blocked the key while this request waited: queue again after the block.
            await asyncio.to_thread(self._limits.release, grant_id)

    async def settle(self, admission: Admission, tokens: int) -> None:
        """Count the tokens the request really used instead of its estimate."""
        await asyncio.to_thread(self._limits.settle, admission.grant_id, tokens)

    async def slow_down(self, key: str, seconds: float) -> None:
        """Nothing starts on `key` for `seconds`, on any worker (a provider's Retry-After)."""
        await asyncio.to_thread(self._limits.block, key, seconds)

    async def _wait_or_release(self, grant_id: str, delay: float) -> None:
        try:
            await _wait_heartbeating(delay)
        except BaseException:
            # Cancelled while waiting: the place is given back for the requests behind it.
            await asyncio.shield(asyncio.to_thread(self._limits.release, grant_id))
            raise


async def _wait_heartbeating(seconds: float) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        await asyncio.sleep(min(left, _BEAT_SECONDS))
        if activity.in_activity():
            activity.heartbeat()


def _attempt_room() -> float | None:
    """Half of what is left of this activity attempt's start-to-close timeout: the most a
    request waits inside it, leaving the other half for the call. None outside an activity."""
    if not activity.in_activity():
        return None
    info = activity.info()
    if info.start_to_close_timeout is None:
        return None
    deadline = info.started_time + info.start_to_close_timeout
    return max((deadline - datetime.now(UTC)).total_seconds(), 0.0) / 2
