"""The one place that decides whether a provider failure is worth another attempt.

Temporal owns retries (the HTTP client's are off), so every failure leaves here as an
`ApplicationError` whose `non_retryable` flag and `next_retry_delay` steer the activity's
RetryPolicy. Each attempt is then visible in the workflow history.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import httpx
from temporalio.exceptions import ApplicationError

from weft.contract.context import CONTEXT_TOO_LONG

RATE_LIMITED = "ProviderRateLimited"
RETRYABLE = "ProviderRetryableError"
REJECTED = "ProviderRequestRejected"
CONNECTION = "ProviderConnectionError"
PROTOCOL = "ProviderProtocolError"
# A final answer that is not valid against the prompt's requiredSchema.
STRUCTURED_OUTPUT_INVALID = "StructuredOutputInvalid"
# A shared rate limit's wait is longer than the turn's wall-time budget leaves: the
# workflow takes the model's fallback instead of waiting (docs/rate-limits.md).
RATE_LIMIT_WAIT_TOO_LONG = "RateLimitWaitTooLong"
# The prompt is over the model's window: never retryable, and a later compaction's cue.

# 408 timeout, 409 conflict (lock contention at OpenAI), 429 rate limit; 5xx below.
_RETRYABLE_4XX = frozenset({408, 409, 429})
_EXCERPT_CHARS = 300
# "This model's maximum context length is N tokens. However, your messages resulted in M
# tokens." (OpenAI; compatible servers say "you requested M tokens") and Anthropic's
# "prompt is too long: M tokens > N maximum".
_OPENAI_LIMIT = re.compile(r"maximum context length is ([\d,]+)", re.IGNORECASE)
_OPENAI_TOKENS = re.compile(r"(?:resulted in|requested) ([\d,]+) tokens", re.IGNORECASE)
_ANTHROPIC_SIZES = re.compile(r"too long:\s*([\d,]+) tokens\s*>\s*([\d,]+)", re.IGNORECASE)


def excerpt(text: str, limit: int = _EXCERPT_CHARS) -> str:
    """Collapse whitespace and cut `text` so error messages stay one readable line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_retry_after(
    headers: Mapping[str, str], *, now: datetime | None = None
) -> timedelta | None:
    """The server's requested wait: `retry-after-ms`, else `Retry-After` (seconds or HTTP-date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        delay = _finite(millis)
        if delay is not None:
            return timedelta(milliseconds=max(delay, 0.0))
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _finite(value)
    if seconds is not None:
        return timedelta(seconds=max(seconds, 0.0))
    try:
        when = email.utils.parsedate_to_datetime(value.strip())
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive one came without a zone.
        when = when.replace(tzinfo=UTC)
    return max(when - (now or datetime.now(UTC)), timedelta(0))


def _finite(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def classify_http_error(status: int, headers: Mapping[str, str], body: str) -> ApplicationError:
    """Map an HTTP error reply (or a stream's error event) to a classified ApplicationError.

    `body` is the raw error body: the JSON envelope or the bare error object.
    """
    delay = parse_retry_after(headers)
    details: dict[str, object] = {"status": status, "body": excerpt(body)}
    sizes = context_overflow(body)
    if sizes is not None:
        # The body's verdict beats status and headers: no retry shrinks the prompt.
        limit, tokens = sizes
        details |= {"max_context_tokens": limit, "request_tokens": tokens}
        return ApplicationError(
            f"prompt exceeds the model's context window (HTTP {status}): {excerpt(body)}",
            details,
            type=CONTEXT_TOO_LONG,
            non_retryable=True,
        )
    message = f"provider replied HTTP {status}: {excerpt(body)}"
    # OpenAI and Anthropic send an explicit verdict that beats the status family.
    should_retry = {k.lower(): v for k, v in headers.items()}.get("x-should-retry")
    if status == 429:
        kind, retry = RATE_LIMITED, True
    elif status in _RETRYABLE_4XX or status >= 500:
        kind, retry = RETRYABLE, True
    else:
        kind, retry = REJECTED, False
    if should_retry == "true":
        retry = True
    elif should_retry == "false":
        kind, retry = REJECTED, False
    return ApplicationError(
        message, details, type=kind, non_retryable=not retry, next_retry_delay=delay
    )


def context_overflow(body: str) -> tuple[int | None, int | None] | None:
    """(limit, request tokens) when `body` is a context-length error, else None.

    Either number is None when the message does not state it.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        error = data if isinstance(data, dict) else {}  # OpenAI streams send the bare object
    text = error.get("message")
    text = text if isinstance(text, str) else ""
    if error.get("code") == "context_length_exceeded" or "maximum context length" in text.lower():
        return _number(_OPENAI_LIMIT.search(text), 1), _number(_OPENAI_TOKENS.search(text), 1)
    if error.get("type") == "invalid_request_error" and text.lower().startswith(
        "prompt is too long"
    ):
        sizes = _ANTHROPIC_SIZES.search(text)
        return _number(sizes, 2), _number(sizes, 1)
    return None


def _number(match: re.Match[str] | None, group: int) -> int | None:
    return int(match.group(group).replace(",", "")) if match else None


def classify_transport_error(exc: httpx.RequestError) -> ApplicationError:
    """Map an httpx failure (connect, timeout, dropped stream) to an ApplicationError."""
    if isinstance(exc, httpx.UnsupportedProtocol):
        # A bad base URL is configuration: no attempt will ever succeed.
        return ApplicationError(
            f"provider URL is unusable: {exc}", type=REJECTED, non_retryable=True
        )
    what = type(exc).__name__
    return ApplicationError(f"provider connection failed ({what}): {exc}", type=CONNECTION)


def protocol_error(problem: str) -> ApplicationError:
    """A reply we could not understand; retryable, as the next attempt may be well formed."""
    return ApplicationError(f"malformed provider reply: {problem}", type=PROTOCOL)


def structured_output_invalid(problem: str, *, last_attempt: bool) -> ApplicationError:
    """A reply that breaks the prompt's requiredSchema: asked again (a model's answers vary)
    until `last_attempt`, then final, so the model's fallbacks and then step_error follow."""
    return ApplicationError(
        f"the reply does not satisfy requiredSchema: {problem}",
        type=STRUCTURED_OUTPUT_INVALID,
        non_retryable=last_attempt,
    )


def rate_limited_by_weft(key: str, delay_seconds: float) -> ApplicationError:
    """A shared rate limit's wait too long to spend inside this attempt: retried after it,
    so Temporal waits and no worker slot is held. A `rate_limit.hit` like a provider's 429."""
    return ApplicationError(
        f"rate limit {key!r} has no place for {delay_seconds:.1f}s; the request was not sent",
        {"status": None, "limitKey": key, "source": "weft"},
        type=RATE_LIMITED,
        next_retry_delay=timedelta(seconds=delay_seconds),
    )


def rate_limit_wait_over_budget(
    key: str, delay_seconds: float, allowed_seconds: float
) -> ApplicationError:
    """The wait for a shared rate limit outlasts the turn's wall-time budget: final for
    this model, so the workflow takes its fallback."""
    return ApplicationError(
        f"rate limit {key!r} has no place for {delay_seconds:.1f}s, more than the "
        f"{allowed_seconds:.1f}s left of the wall-time budget; the request was not sent",
        {"limitKey": key, "waitSeconds": delay_seconds, "allowedSeconds": allowed_seconds},
        type=RATE_LIMIT_WAIT_TOO_LONG,
        non_retryable=True,
    )


def with_limit_key(err: ApplicationError, key: str) -> ApplicationError:
    """A provider's 429 naming the rate-limit key it blocked, for its `rate_limit.hit`."""
    first = err.details[0] if err.details and isinstance(err.details[0], dict) else {}
    return ApplicationError(
        err.message,
        {**first, "limitKey": key},
        type=err.type,
        non_retryable=err.non_retryable,
        next_retry_delay=err.next_retry_delay,
    )
