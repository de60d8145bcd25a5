"""Requests per minute per API key and per tenant, held across every `weft serve` replica
on the store (`serve.requestLimits`, docs/http-api.md#replicas-behind-a-load-balancer).

Each counted request takes a place in its key's window and in its tenant's, both in one
transaction of the store's rate-limit ledger (store/rate_limits.py: the one the providers'
limits use, its times the database's clock on PostgreSQL), so N replicas together admit
no more than the limit. A request with no place now is refused with `429`, `Retry-After`
(when the oldest request counted leaves the window) and a message naming the limit; it
takes no place in either window.

Not counted: `/healthz` (no credential), the inbox page's static assets, and the
server's own token (the operator's: a limit on it would lock the operator out of the
server it runs). Without limits configured the middleware is not installed at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from weft.api.auth import ADMIN_TOKEN, PAGE_PATH, Principal
from weft.store import Store
from weft.store.rate_limit_window import WindowLimit

log = logging.getLogger(__name__)

# The ledger's keys of these limits, apart from any provider's.
KEY_PREFIX = "serve:key:"
TENANT_PREFIX = "serve:tenant:"


@dataclass(frozen=True)
class RequestLimits:
    """At most `per_key` requests a minute from one credential (an API key, a JWT's
    subject) and `per_tenant` from one tenant's credentials together (None: no cap),
    counted over `window_seconds` (the per-minute figures scaled to it)."""

    per_key: int | None = None
    per_tenant: int | None = None
    window_seconds: float = 60.0

    def __post_init__(self) -> None:
        for name, value in (
            ("perKeyPerMinute", self.per_key),
            ("perTenantPerMinute", self.per_tenant),
        ):
            if value is not None and value < 1:
                raise ValueError(f"serve.requestLimits.{name} must be at least 1, not {value}")
        if not (0 < self.window_seconds <= 3600):
            raise ValueError(
                f"serve.requestLimits.windowSeconds must be in (0, 3600], not {self.window_seconds}"
            )

    @property
    def any(self) -> bool:
        return self.per_key is not None or self.per_tenant is not None

    def window(self, per_minute: int) -> WindowLimit:
        """The requests one window admits: the per-minute figure scaled, at least one."""
        requests = max(1, math.floor(per_minute * self.window_seconds / 60))
        return WindowLimit(requests=requests, tokens=None, window_seconds=self.window_seconds)


@dataclass(frozen=True)
class Refusal:
    """Why a request may not run now, and when it may."""

    message: str
    retry_after_seconds: int


@dataclass(frozen=True)
class _Count:
    """One limit a request counts against: its ledger key, cap, and how it is named."""

    key: str
    per_minute: int
    whose: str  # `key k_…`, `JWT jwt:…`, `tenant acme`
    setting: str  # the config field, for the message


class RequestLimiter:
    """Takes a request's places in the store's ledger, or says why it has none."""

    def __init__(self, store: Store, limits: RequestLimits) -> None:
        self._ledger = store.rate_limits
        self._limits = limits

    def admit(self, who: Principal) -> Refusal | None:
        """Count one request of `who` (blocking: run it in a thread); None when admitted.
        Its key's place and its tenant's are taken in one transaction, or neither."""
        counts = {count.key: count for count in self._counts(who)}
        places = [(key, self._limits.window(c.per_minute)) for key, c in counts.items()]
        refused = self._ledger.reserve_all(places, max_delay=0) if places else None
        if refused is None:
            return None
        count, retry = counts[refused.key], max(1, math.ceil(refused.delay_seconds))
        return Refusal(
            f"rate limited: {count.whose} is at its limit of {count.per_minute} requests a "
            f"minute (serve.requestLimits.{count.setting}); retry in {retry} s",
            retry,
        )

    def _counts(self, who: Principal) -> list[_Count]:
        counts = []
        if self._limits.per_key is not None:
            whose = f"{who.credential} {who.subject}"
            counts.append(
                _Count(KEY_PREFIX + who.subject, self._limits.per_key, whose, "perKeyPerMinute")
            )
        if self._limits.per_tenant is not None and who.tenant is not None:
            whose = f"tenant {who.tenant}"
            counts.append(
                _Count(
                    TENANT_PREFIX + who.tenant, self._limits.per_tenant, whose, "perTenantPerMinute"
                )
            )
        return counts


class LimitRequests:
    """ASGI middleware, inside `RequireCredential` (it reads the request's principal):
    `429` for a request over its key's or tenant's limit, before any route runs."""

    def __init__(self, app: ASGIApp, *, limiter: RequestLimiter) -> None:
        self._app = app
        self._limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        who = scope.get("state", {}).get("principal") if scope["type"] == "http" else None
        if not isinstance(who, Principal) or who == ADMIN_TOKEN or _static_asset(scope):
            await self._app(scope, receive, send)
            return
        try:
            refusal = await asyncio.to_thread(self._limiter.admit, who)
        except Exception:
            # The limit cannot be told: refuse rather than let it lapse unseen.
            log.exception("could not count a request of %s against its limits", who.subject)
            refusal = Refusal("the request limits could not be checked; retry", 1)
            await _refuse(send, 503, refusal)
            return
        if refusal is not None:
            await _refuse(send, 429, refusal)
            return
        await self._app(scope, receive, send)


def _static_asset(scope: Scope) -> bool:
    """The inbox page's script, style and icon: one page load fetches several."""
    path = str(scope.get("path", ""))
    return scope.get("method") in ("GET", "HEAD") and path.startswith(PAGE_PATH + "/")


async def _refuse(send: Send, status: int, refusal: Refusal) -> None:
    body = json.dumps({"error": refusal.message, "fields": []}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"retry-after", str(refusal.retry_after_seconds).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = ["LimitRequests", "Refusal", "RequestLimiter", "RequestLimits"]
