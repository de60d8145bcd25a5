"""The rate limit's maths: grants placed in a sliding window, and limits parsed and scaled."""

from __future__ import annotations

import random

import pytest

from weft.activities.rate_limits import RateLimit, parse_keyed_rate
from weft.store.rate_limit_window import Grant, WindowLimit, earliest_start

TEN_PER_10S = WindowLimit(requests=10, tokens=None, window_seconds=10)
HOLD = TEN_PER_10S.hold_seconds


def _place(limit: WindowLimit, arrivals: list[float], tokens: list[int]) -> list[Grant]:
    """Grants for requests arriving at `arrivals`, each placed as the store would."""
    grants: list[Grant] = []
    for now, count in zip(arrivals, tokens, strict=True):
        live = [g for g in grants if g.start + limit.hold_seconds > now]
        start = earliest_start(limit, live, now=now, blocked_until=0, tokens=count)
        grants.append(Grant(start, limit.counted_tokens(count)))
    return grants


def _most_in_any_window(starts: list[float], window: float) -> int:
    """The most starts any half-open window [t, t + window) holds (t at each start)."""
    ordered = sorted(starts)
    return max(sum(1 for s in ordered if t <= s < t + window) for t in ordered)


def test_a_request_under_the_cap_starts_now() -> None:
    """With room in the window, the request starts at once."""
    grants = [Grant(100.0 + i, 0) for i in range(9)]
    assert earliest_start(TEN_PER_10S, grants, now=109.5, blocked_until=0, tokens=0) == 109.5


def test_a_full_window_waits_for_its_oldest_grant_to_leave() -> None:
    """The eleventh request waits until the first grant stops counting (window plus guard)."""
    grants = [Grant(100.0 + i * 0.1, 0) for i in range(10)]
    start = earliest_start(TEN_PER_10S, grants, now=101.0, blocked_until=0, tokens=0)
    assert start == pytest.approx(100.0 + HOLD)


@pytest.mark.parametrize(("window", "hold"), [(60, 60.6), (10, 10.5), (2, 2.1)])
def test_a_grant_is_held_past_the_window_by_a_jitter_guard(window: float, hold: float) -> None:
    """A grant counts 1 % longer than its window, at least 0.5 s, at most 5 % more."""
    limit = WindowLimit(requests=1, tokens=None, window_seconds=window)
    assert limit.hold_seconds == pytest.approx(hold)


def test_a_burst_never_puts_more_than_the_cap_in_any_window() -> None:
    """200 requests arriving at random over 30 s: no 10 s window holds more than 10 starts,
    and the starts keep up with the limit (not far under it)."""
    rng = random.Random(7)
    arrivals = sorted(rng.uniform(0, 30) for _ in range(200))
    grants = _place(TEN_PER_10S, arrivals, [0] * len(arrivals))
    starts = [g.start for g in grants]
    assert _most_in_any_window(starts, 10.0) == 10
    # Saturated: ~10 per 10.5 s, so the 200th starts after about 19 windows.
    assert starts[-1] == pytest.approx(19 * HOLD, abs=HOLD)


def test_tokens_wait_until_enough_leave_the_window() -> None:
    """A request whose tokens do not fit waits until the grants holding them leave."""
    limit = WindowLimit(requests=None, tokens=1000, window_seconds=60)
    grants = [Grant(0.0, 600), Grant(5.0, 300)]
    assert earliest_start(limit, grants, now=6.0, blocked_until=0, tokens=100) == 6.0
    start = earliest_start(limit, grants, now=6.0, blocked_until=0, tokens=200)
    assert start == pytest.approx(0.0 + limit.hold_seconds)
    start = earliest_start(limit, grants, now=6.0, blocked_until=0, tokens=800)
    assert start == pytest.approx(5.0 + limit.hold_seconds)


def test_a_request_larger_than_the_window_runs_alone() -> None:
    """A request over the whole token cap counts as the cap: it waits for an empty window
    instead of forever."""
    limit = WindowLimit(requests=None, tokens=1000, window_seconds=60)
    assert limit.counted_tokens(5000) == 1000
    start = earliest_start(limit, [Grant(0.0, 10)], now=1.0, blocked_until=0, tokens=5000)
    assert start == pytest.approx(limit.hold_seconds)


def test_a_blocked_key_and_earlier_grants_come_first() -> None:
    """Nothing starts before the key's Retry-After block, nor before the latest grant."""
    assert earliest_start(TEN_PER_10S, [], now=5.0, blocked_until=8.0, tokens=0) == 8.0
    queued = [Grant(9.0, 0)]
    assert earliest_start(TEN_PER_10S, queued, now=5.0, blocked_until=0, tokens=0) == 9.0


@pytest.mark.parametrize(
    ("limit", "problem"),
    [
        ({"requests": None, "tokens": None}, "needs requests or tokens"),
        ({"requests": 0, "tokens": None}, "requests must be at least 1"),
        ({"requests": 1, "tokens": None, "window_seconds": 0}, "window must be positive"),
    ],
)
def test_a_bad_window_limit_is_refused(limit: dict[str, float | None], problem: str) -> None:
    """A limit that caps nothing, or nothing at all, is refused, naming what is wrong."""
    with pytest.raises(ValueError, match=problem):
        WindowLimit(**{"window_seconds": 60, **limit})  # type: ignore[arg-type]


def test_limits_parse_and_scale_to_their_window() -> None:
    """`500rpm,200000tpm` parses; a 10 s window admits a sixth of the per-minute caps."""
    limit = RateLimit.parse("500rpm, 200000TPM")
    assert (limit.requests_per_minute, limit.tokens_per_minute) == (500, 200000)
    short = limit.model_copy(update={"window_seconds": 10.0})
    assert short.window() == WindowLimit(requests=83, tokens=33333, window_seconds=10.0)
    key, keyed = parse_keyed_rate("openai=60rpm")
    assert key == keyed.key == "openai" and keyed.tokens_per_minute is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("500rps", "'500rps' is neither"),
        ("5rpm,6rpm", "rpm is given twice"),
        ("0rpm", "greater than or equal to 1"),
        ("=5rpm", "write KEY=LIMITS"),
    ],
)
def test_a_bad_rate_is_refused_naming_the_part(text: str, problem: str) -> None:
    """A malformed rate names the part that is wrong."""
    with pytest.raises(ValueError, match=problem):
        parse_keyed_rate(text if "=" in text else f"openai={text}")


def test_a_rate_limit_config_needs_a_cap() -> None:
    """`rateLimit: {}` is refused with the fields that would make it one."""
    with pytest.raises(ValueError, match="requestsPerMinute, tokensPerMinute"):
        RateLimit.model_validate({"windowSeconds": 10})
