"""Unit tests of the one provider error classifier and the SSE parser."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from weft.activities.providers.errors import (
    classify_http_error,
    classify_transport_error,
    parse_retry_after,
)
from weft.activities.providers.sse import SseEvent, iter_sse
from weft.contract.context import CONTEXT_TOO_LONG


def test_retry_after_seconds() -> None:
    """Retry-After in delta-seconds becomes that many seconds."""
    assert parse_retry_after({"Retry-After": "7"}) == timedelta(seconds=7)
    assert parse_retry_after({"retry-after": "0.5"}) == timedelta(milliseconds=500)


def test_retry_after_http_date() -> None:
    """Retry-After as an HTTP-date becomes the time left until then."""
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"Retry-After": header}, now=now) == timedelta(seconds=30)


def test_retry_after_in_the_past_is_zero() -> None:
    """A date already past asks for no delay rather than a negative one."""
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    header = format_datetime(now - timedelta(minutes=5), usegmt=True)
    assert parse_retry_after({"Retry-After": header}, now=now) == timedelta(0)


def test_retry_after_ms_wins() -> None:
    """retry-after-ms is preferred over Retry-After, as OpenAI's clients do."""
    headers = {"retry-after-ms": "250", "retry-after": "9"}
    assert parse_retry_after(headers) == timedelta(milliseconds=250)


def test_retry_after_garbage_is_ignored() -> None:
    """An unparseable or absent Retry-After leaves the delay to the RetryPolicy."""
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"retry-after-ms": "nan"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503, 504, 529])
def test_retryable_statuses(status: int) -> None:
    """408, 409 and every 5xx are retryable ProviderRetryableError."""
    error = classify_http_error(status, {}, "boom")
    assert not error.non_retryable and error.type == "ProviderRetryableError"
    assert str(status) in error.message and "boom" in error.message


def test_rate_limited() -> None:
    """429 is retryable as ProviderRateLimited with the server's delay."""
    error = classify_http_error(429, {"Retry-After": "3"}, "slow down")
    assert error.type == "ProviderRateLimited" and not error.non_retryable
    assert error.next_retry_delay == timedelta(seconds=3)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_other_4xx_are_rejected(status: int) -> None:
    """Other 4xx are non-retryable ProviderRequestRejected."""
    error = classify_http_error(status, {}, "bad")
    assert error.non_retryable and error.type == "ProviderRequestRejected"


def test_x_should_retry_overrides_status() -> None:
    """An explicit x-should-retry header beats the status family in both directions."""
    assert not classify_http_error(400, {"x-should-retry": "true"}, "").non_retryable
    assert classify_http_error(503, {"x-should-retry": "false"}, "").non_retryable


def test_body_excerpt_is_short() -> None:
    """The message carries a one-line excerpt of the body, not all of it."""
    error = classify_http_error(500, {}, "line one\n\nline two " + "x" * 5000)
    assert "line one line two" in error.message and len(error.message) < 400


def _openai_error(message: str, code: str | None = None) -> str:
    return json.dumps(
        {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    )


@pytest.mark.parametrize(
    ("body", "limit", "tokens"),
    [
        (
            _openai_error(
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130512 tokens. Please reduce the length of the messages.",
                "context_length_exceeded",
            ),
            128_000,
            130_512,
        ),
        # vLLM and other compatible servers: no code, "you requested".
        (
            _openai_error(
                "This model's maximum context length is 4,096 tokens. However, you requested "
                "5000 tokens (4000 in the messages, 1000 in the completion)."
            ),
            4_096,
            5_000,
        ),
        # A code without numbers in the message.
        (
            _openai_error("Your input exceeds the context window.", "context_length_exceeded"),
            None,
            None,
        ),
        (
            json.dumps(
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": "prompt is too long: 208310 tokens > 200000 maximum",
                    },
                }
            ),
            200_000,
            208_310,
        ),
    ],
)
def test_context_length_exceeded(body: str, limit: int | None, tokens: int | None) -> None:
    """Both providers' context-length 400s become ProviderContextLengthExceeded with the numbers."""
    error = classify_http_error(400, {"x-should-retry": "true"}, body)
    assert error.type == CONTEXT_TOO_LONG == "ProviderContextLengthExceeded"
    assert error.non_retryable  # whatever the headers say, a retry cannot shrink the prompt
    assert error.details[0]["max_context_tokens"] == limit
    assert error.details[0]["request_tokens"] == tokens


def test_context_length_in_a_stream_error_object() -> None:
    """A bare error object (OpenAI mid-stream) is recognised even under a 5xx status."""
    bare = {"message": "maximum context length is 8192 tokens", "code": "context_length_exceeded"}
    error = classify_http_error(500, {}, json.dumps(bare))
    assert error.type == CONTEXT_TOO_LONG and error.non_retryable
    assert error.details[0]["max_context_tokens"] == 8192
    assert error.details[0]["request_tokens"] is None


@pytest.mark.parametrize(
    "body",
    [
        _openai_error("Invalid value for 'temperature'.", "invalid_value"),
        json.dumps(
            {"type": "error", "error": {"type": "not_found_error", "message": "prompt is too long"}}
        ),
        "maximum context length is 10 tokens",  # not JSON: no verdict to trust
        "[1, 2]",
    ],
)
def test_other_400s_are_not_context_errors(body: str) -> None:
    """Other rejections keep the ProviderRequestRejected type."""
    assert classify_http_error(400, {}, body).type == "ProviderRequestRejected"


def test_transport_errors() -> None:
    """Connect errors and timeouts are retryable; an unusable URL scheme is not."""
    request = httpx.Request("POST", "http://x/")
    connect = classify_transport_error(httpx.ConnectError("refused", request=request))
    timeout = classify_transport_error(httpx.ReadTimeout("slow", request=request))
    bad_url = classify_transport_error(httpx.UnsupportedProtocol("ftp", request=request))
    assert connect.type == timeout.type == "ProviderConnectionError"
    assert not connect.non_retryable and not timeout.non_retryable
    assert bad_url.non_retryable


async def _lines(*lines: str) -> AsyncIterator[str]:
    for line in lines:
        yield line


async def test_sse_parser_fields() -> None:
    """Events dispatch on blank lines with names, multi-line data, and comments skipped."""
    lines = _lines(": ping", "event: a", "data: one", "data: two", "", "data:x", "", "data: tail")
    events = [e async for e in iter_sse(lines)]
    assert events == [SseEvent("a", "one\ntwo"), SseEvent(None, "x"), SseEvent(None, "tail")]
