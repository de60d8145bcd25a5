"""Idempotent POSTs: an `Idempotency-Key` header makes a retried request act once.

Every POST route takes `IdempotentRequest` (the dependency `idempotency(store)` builds) and
runs its action through `IdempotentRequest.run`:

- no key: the action runs;
- a new key: it is claimed in the store (`store.idempotency`), the action runs and its
  final reply (2xx, or a 4xx error) is recorded;
- the same key and the same request again: the recorded reply, with `Idempotent-Replayed:
  true`, without acting again;
- the same key for another request (another route or body): 422 naming the header;
- the same key while the first request is still running: 409, retry later;
- a 5xx, an unexpected error or a cancelled request releases the key: the action may be
  retried with it.

The key also names what the action creates, so that even a retry after a crash between
acting and recording cannot act twice: `derived_id` gives the thread id of `POST /threads`
and the update ids Temporal deduplicates within a run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Header, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel

from weft.api.auth import principal
from weft.api.gateway.app import GatewayError
from weft.store import Store
from weft.store.idempotency import (
    MAX_KEY_CHARS,
    Claimed,
    InProgress,
    Mismatch,
    Recorded,
)

IDEMPOTENCY_HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_PATTERN = r"^[\x20-\x7e]{1,255}$"


@dataclass(frozen=True)
class Reply:
    """What an action answers: a status and a JSON body.

    `keep=False` answers without recording, so a retry with the key runs the action again
    (a turn still running when its wait timed out: the retry waits on).
    """

    status: int
    body: BaseModel | dict[str, Any]
    keep: bool = True

    def json(self) -> Any:
        if isinstance(self.body, BaseModel):
            return self.body.model_dump(mode="json", by_alias=True)
        return self.body


class IdempotentRequest:
    """One POST request, with or without a key; `run` its action through it."""

    def __init__(
        self,
        store: Store,
        key: str | None,
        scope: str,
        fingerprint: str,
        *,
        tenant: str | None = None,
    ) -> None:
        self._store = store
        self.key = key
        self.scope = scope
        self.fingerprint = fingerprint
        # A tenant's keys are its own: the same key sent by two tenants is two requests,
        # and neither replays (or derives the ids of) the other's. The server's token
        # keeps the plain key.
        self._tenant = tenant
        self._stored = key if key is None or tenant is None else _tenant_key(tenant, key)

    def derived_id(self, prefix: str) -> str | None:
        """An id that only this key gives (None without a key): `<prefix>-<32 hex>`."""
        if self.key is None:
            return None
        tenant = "" if self._tenant is None else f"{self._tenant}\n"
        digest = hashlib.sha256(f"{prefix}\n{tenant}{self.key}".encode()).hexdigest()
        return f"{prefix}-{digest[:32]}"

    async def run(self, action: Callable[[], Awaitable[Reply]]) -> Response:
        """Run `action` once for this key; a retry gets the recorded reply."""
        if self.key is None or self._stored is None:
            return _respond(await action())
        claim = await asyncio.to_thread(
            self._store.idempotency.claim, self._stored, self.scope, self.fingerprint
        )
        if isinstance(claim, Recorded):
            return JSONResponse(
                claim.response, status_code=claim.status, headers={REPLAYED_HEADER: "true"}
            )
        if isinstance(claim, Mismatch):
            raise GatewayError(
                422,
                f"{IDEMPOTENCY_HEADER} {self.key!r} was used for another request "
                f"({claim.scope}, or another body); use a new key for a new request",
                fields=[IDEMPOTENCY_HEADER],
            )
        if isinstance(claim, InProgress):
            raise GatewayError(
                409,
                f"a request with {IDEMPOTENCY_HEADER} {self.key!r} is in progress; retry "
                "in a moment to get its reply",
                fields=[IDEMPOTENCY_HEADER],
            )
        return await self._run_claimed(claim, action)

    async def _run_claimed(
        self, claim: Claimed, action: Callable[[], Awaitable[Reply]]
    ) -> Response:
        assert self._stored is not None
        key = self._stored
        try:
            reply = await action()
        except GatewayError as err:
            # A 429 (a tenant's quota) is a "not now", like a 5xx: the same key may retry.
            if err.status < 500 and err.status != 429:
                await self._record(claim, err.status, err.body.model_dump(mode="json"))
            else:
                await asyncio.to_thread(self._store.idempotency.release, key, claim.claim_id)
            raise
        except BaseException:
            # Not awaited: a cancelled request's task may be cancelled again at any await.
            self._store.idempotency.release(key, claim.claim_id)
            raise
        if reply.keep and reply.status < 500:
            await self._record(claim, reply.status, reply.json())
        else:
            await asyncio.to_thread(self._store.idempotency.release, key, claim.claim_id)
        return _respond(reply)

    async def _record(self, claim: Claimed, status: int, body: Any) -> None:
        assert self._stored is not None
        await asyncio.to_thread(
            self._store.idempotency.record, self._stored, claim.claim_id, status, body
        )


KeyHeader = Annotated[
    str | None,
    Header(
        alias=IDEMPOTENCY_HEADER,
        description="makes a retry of this request act once and get the same reply: up "
        "to 255 printable ASCII characters, unique per request (a UUID will do); kept 24 h",
        json_schema_extra={"pattern": KEY_PATTERN, "maxLength": MAX_KEY_CHARS},
    ),
]


def idempotency(store: Store) -> Callable[..., Awaitable[IdempotentRequest]]:
    """The FastAPI dependency of every POST route: the request's key, scope and fingerprint.

    A malformed key is refused with 400 naming the header, before anything acts.
    """

    async def dependency(request: Request, key: KeyHeader = None) -> IdempotentRequest:
        if key is not None and not _valid_key(key):
            raise GatewayError(
                400,
                f"{IDEMPOTENCY_HEADER}: 1 to {MAX_KEY_CHARS} printable ASCII characters",
                fields=[IDEMPOTENCY_HEADER],
            )
        scope = f"{request.method} {request.url.path}"
        fingerprint = request_fingerprint(scope, request.url.query, await request.body())
        tenant = principal(request).confined_to
        return IdempotentRequest(store, key, scope, fingerprint, tenant=tenant)

    return dependency


def _tenant_key(tenant: str, key: str) -> str:
    """The stored key of a tenant's `key`: within the column, whatever the key's length."""
    return f"{tenant}:" + hashlib.sha256(key.encode()).hexdigest()


def request_fingerprint(scope: str, query: str, body: bytes) -> str:
    """What makes two requests the same: route and path, query string, canonical body."""
    return hashlib.sha256("\n".join((scope, query, _canonical(body))).encode()).hexdigest()


def _valid_key(key: str) -> bool:
    return 0 < len(key) <= MAX_KEY_CHARS and all(" " <= c <= "~" for c in key)


def _canonical(body: bytes) -> str:
    """The body as sorted, compact JSON, so spacing and key order do not make it another
    request; bytes that are not JSON as they are."""
    try:
        return json.dumps(json.loads(body), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return body.hex()


def _respond(reply: Reply) -> Response:
    return JSONResponse(reply.json(), status_code=reply.status)


__all__ = [
    "IDEMPOTENCY_HEADER",
    "REPLAYED_HEADER",
    "IdempotentRequest",
    "KeyHeader",
    "Reply",
    "idempotency",
    "request_fingerprint",
]
