"""A provider under a rate limit shared by every worker (docs/rate-limits.md).

The worker wraps each provider whose config sets `rateLimit` (workers/providers.py), so
every request to it, a step's or a compaction's, first takes its place in the key's
window, counts its estimated tokens (input, plus the output it allows) and settles them
to the reply's usage. A 429 blocks the key for its Retry-After on every worker.
"""

from __future__ import annotations

from temporalio.exceptions import ApplicationError

from weft.activities.providers.base import (
    ChatProvider,
    ChatReply,
    ChatRequest,
    DeltaCallback,
    RateLimitWait,
)
from weft.activities.providers.errors import RATE_LIMITED, with_limit_key
from weft.activities.rate_limits import RateLimit, RateLimiter
from weft.contract.context_tokens import estimate_message_tokens

# A 429 without Retry-After blocks the key this long: Temporal's first retry interval.
DEFAULT_BLOCK_SECONDS = 1.0


class RateLimitedProvider:
    """`inner`, admitted by `limiter` under `limit` on `key`."""

    def __init__(
        self, inner: ChatProvider, *, limiter: RateLimiter, key: str, limit: RateLimit
    ) -> None:
        self._inner = inner
        self._limiter = limiter
        self._key = key
        self._limit = limit

    async def complete(
        self, request: ChatRequest, *, on_delta: DeltaCallback | None = None
    ) -> ChatReply:
        estimate = request.estimated_input_tokens
        if estimate is None:
            estimate = estimate_message_tokens(request.messages)
        admission = await self._limiter.admit(
            self._key,
            self._limit,
            estimate + (request.max_output_tokens or 0),
            wait_allowance=request.wait_allowance,
        )
        try:
            reply = await self._inner.complete(request, on_delta=on_delta)
        except ApplicationError as err:
            if err.type != RATE_LIMITED:
                raise  # the request counts as sent, with its estimate
            delay = err.next_retry_delay
            seconds = delay.total_seconds() if delay is not None else DEFAULT_BLOCK_SECONDS
            await self._limiter.slow_down(self._key, seconds)
            raise with_limit_key(err, self._key) from None
        await self._limiter.settle(admission, reply.usage.input_tokens + reply.usage.output_tokens)
        if admission.waited_seconds <= 0:
            return reply
        waited = RateLimitWait(limit_key=self._key, waited_seconds=admission.waited_seconds)
        return reply.model_copy(update={"rate_limit_wait": waited})
