"""The sliding-window maths of a shared rate limit, pure: when may the next request start?

Every request takes a grant: a start time and the tokens it counts. A grant counts against
the window from its start for `hold` seconds (the window plus a small jitter guard), so
any window of that length holds at most `requests` grants and `tokens` tokens. Grants are
handed out in order (first come, first served), each at or after the latest one, so
checking the window that ends at the new start checks every window that holds it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# A grant's start is when weft sends; the provider counts when the request arrives. Two
# requests one window apart arrive closer by the difference of their delays (network, a
# busy worker's event loop), so each grant is held longer than the window by 1 % of it,
# and by at least half a second unless that is over 5 % of a short window.
JITTER_GUARD_SHARE = 0.01
JITTER_GUARD_FLOOR_SECONDS = 0.5
JITTER_GUARD_MAX_SHARE = 0.05


@dataclass(frozen=True)
class WindowLimit:
    """At most `requests` requests and `tokens` tokens in any `window_seconds`; None: no cap."""

    requests: int | None
    tokens: int | None
    window_seconds: float

    def __post_init__(self) -> None:
        if self.requests is None and self.tokens is None:
            raise ValueError("a rate limit needs requests or tokens (or both)")
        for name, value in (("requests", self.requests), ("tokens", self.tokens)):
            if value is not None and value < 1:
                raise ValueError(f"a rate limit's {name} must be at least 1, not {value}")
        if not (self.window_seconds > 0 and math.isfinite(self.window_seconds)):
            raise ValueError(f"a rate limit's window must be positive, not {self.window_seconds}")

    @property
    def hold_seconds(self) -> float:
        """How long a grant counts: the window and its jitter guard."""
        window = self.window_seconds
        floor = min(JITTER_GUARD_FLOOR_SECONDS, window * JITTER_GUARD_MAX_SHARE)
        return window + max(window * JITTER_GUARD_SHARE, floor)

    def counted_tokens(self, tokens: int) -> int:
        """What a request of `tokens` reserves: one larger than the whole window's tokens
        reserves all of them (it then runs alone in its window instead of never)."""
        tokens = max(tokens, 0)
        return tokens if self.tokens is None else min(tokens, self.tokens)


@dataclass(frozen=True)
class Grant:
    """A request's place in the window: when it starts and the tokens it counts."""

    start: float
    tokens: int


def earliest_start(
    limit: WindowLimit,
    grants: Sequence[Grant],
    *,
    now: float,
    blocked_until: float,
    tokens: int,
) -> float:
    """The earliest time a request of `tokens` may start after `grants` (in start order).

    Not before `now`, the key's `blocked_until` (a provider's Retry-After) or the latest
    grant; then late enough that the grants still counted leave room for one more request
    and its tokens.
    """
    start = max(now, blocked_until, grants[-1].start if grants else now)
    hold = limit.hold_seconds
    needed = limit.counted_tokens(tokens)
    counted = [g for g in grants if g.start + hold > start]
    held_tokens = sum(g.tokens for g in counted)
    first = 0
    while first < len(counted) and not _fits(limit, counted, first, held_tokens, needed):
        # The oldest grant still counted must leave the window first.
        start = max(start, counted[first].start + hold)
        held_tokens -= counted[first].tokens
        first += 1
    return start


def _fits(
    limit: WindowLimit, counted: Sequence[Grant], first: int, held_tokens: int, needed: int
) -> bool:
    if limit.requests is not None and len(counted) - first >= limit.requests:
        return False
    return limit.tokens is None or held_tokens + needed <= limit.tokens
