"""The Agent Runtime facts a provider's failure or reply carries besides `model.*`.

`model.call` writes them with the attempt's other events (so a retried attempt writes
each once): `rate_limit.hit` for a 429 with the wait the provider asked for, for a shared
rate limit whose wait is left to Temporal's retry, and for a request a shared limit held
back inside the attempt (`waitedSeconds`), `runtime.error` for a failure no attempt can cure (the provider refuses the request or
its credentials), `reasoning.summary` when the provider summarises its reasoning.
"""

from __future__ import annotations

from typing import Any

from temporalio.exceptions import ApplicationError

from weft.activities.providers.base import ChatReply
from weft.activities.providers.errors import RATE_LIMITED, REJECTED

# (id suffix, event type, payload) of one fact of an attempt.
Fact = tuple[str, str, dict[str, Any]]


def failure_facts(err: ApplicationError, *, model: str, provider: str, attempt: int) -> list[Fact]:
    """The facts of a failed attempt beyond its `model.failed`."""
    details = err.details[0] if err.details and isinstance(err.details[0], dict) else {}
    status = details.get("status")
    if err.type == RATE_LIMITED:
        delay = err.next_retry_delay
        return [
            (
                "ratelimit",
                "rate_limit.hit",
                {
                    "model": model,
                    "provider": provider,
                    "status": status,
                    "attempt": attempt,
                    # What the provider's Retry-After asked for; None when it said nothing.
                    "retryAfterSeconds": delay.total_seconds() if delay is not None else None,
                    "willRetry": not err.non_retryable,
                    # The shared limit's key (docs/rate-limits.md), when the provider has
                    # one; `source: weft` when weft's own limit, not the provider, said so.
                    **{k: details[k] for k in ("limitKey", "source") if k in details},
                },
            )
        ]
    if err.type == REJECTED and err.non_retryable:
        return [
            (
                "fatal",
                "runtime.error",
                {
                    "code": "provider_rejected",
                    "model": model,
                    "provider": provider,
                    "status": status,
                    "attempt": attempt,
                    "message": str(err),
                    "retryable": False,
                },
            )
        ]
    return []


def reply_facts(reply: ChatReply, *, model: str, message_id: str | None) -> list[Fact]:
    """The facts of an answered attempt beyond its `model.completed`."""
    facts: list[Fact] = []
    if reply.rate_limit_wait is not None:
        wait = reply.rate_limit_wait
        facts.append(
            (
                "ratelimit-wait",
                "rate_limit.hit",
                {
                    "model": model,
                    "source": "weft",
                    "limitKey": wait.limit_key,
                    # Waited inside the attempt for a place in the shared window.
                    "waitedSeconds": round(wait.waited_seconds, 3),
                    "willRetry": False,
                },
            )
        )
    if reply.reasoning_summary:
        facts.append(
            (
                "reasoning-summary",
                "reasoning.summary",
                {"model": model, "messageId": message_id, "summary": reply.reasoning_summary},
            )
        )
    return facts
