"""The idempotency key of one call: the same on every attempt, different for every other call."""

from __future__ import annotations

import hashlib


def idempotency_key(thread_id: str, anchor: str) -> str:
    """The idempotency key of one call in `thread_id`: `anchor` names the call by ids the
    workflow fixed when it scheduled it (docs/thread-state.md, `idempotency_key`).

    Hashed: thread ids may be long or hold any character, and an external API takes a
    short, header-safe key (Stripe's `Idempotency-Key` at most 255 characters).
    """
    digest = hashlib.sha256(f"{thread_id}\n{anchor}".encode()).hexdigest()
    return f"weft-{digest[:32]}"
