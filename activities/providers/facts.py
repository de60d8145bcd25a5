"""The Agent Runtime facts a provider's failure or reply carries besides `model.*`.

`model.call` writes them with the attempt's other events (so a retried attempt writes
each once): `rate_limit.hit` for a 429 with the wait the provider asked for,
`runtime.error` for a failure no attempt can cure (the provider refuses the request or
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
    if not reply.reasoning_summary:
        return []
    return [
        (
            "reasoning-summary",
            "reasoning.summary",
            {"model": model, "messageId": message_id, "summary": reply.reasoning_summary},
        )
    ]
