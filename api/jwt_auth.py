"""OIDC/JWT bearer tokens (docs/tenants.md): a token signed by a configured issuer acts for
the tenant and with the scopes its claims name.

A presented bearer is taken for a JWT by its shape alone (`jwt_header`): three
dot-separated base64url parts whose first decodes to a JSON object, which neither the
server's token nor an API key (`weft.<id>.<secret>`: "weft" decodes to no JSON) has.
`JwtVerifier` then checks, in order: the header's algorithm against the allow-list
(public-key algorithms only, so never `none` and never an HMAC keyed with a public key),
its `kid` against the issuer's key set, the signature with that key, then `iss`, `aud`,
`exp` and `nbf` (with a small leeway), and finally the subject, tenant and scope claims.
Each refusal says which of these failed.

The key set is fetched with httpx on the event loop, never blocking it, and kept by `kid`
for `cache_seconds`. A token naming a `kid` the set lacks (a rotated key) refetches it,
at most once every `min_refresh_seconds`, and concurrent requests share one fetch, so a
flood of made-up kids reaches the issuer's endpoint about never.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx
import jwt

from weft.contract.tenants import SCOPES, check_tenant

log = logging.getLogger(__name__)

# Public-key signature algorithms: never `none`, never HS* (an HMAC keyed with a public
# key anybody can read is a forgery waiting to happen).
ASYMMETRIC_ALGORITHMS: Final = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
# Key types a JWKS may hold for those algorithms; an `oct` (symmetric) key is never used.
KEY_TYPES: Final = frozenset({"RSA", "EC", "OKP"})
API_KEY_PREFIX = "weft."
SUBJECT_PREFIX = "jwt:"  # a token's `sub` in principals and audit records
SUBJECT_LENGTH = 64  # the audit log's subject column
MAX_TOKEN_CHARS = 16 * 1024
MAX_JWKS_BYTES = 1024 * 1024
FETCH_TIMEOUT_SECONDS = 5.0
_HEAD = re.compile(r"[A-Za-z0-9_-]+")
_SIGNATURE = re.compile(r"[A-Za-z0-9_-]*")  # empty for `alg: none`, which is refused by name


class JwtRefused(Exception):
    """Why a JWT was not accepted: the reply's message and status (401, or 503 when the
    issuer's key set cannot be fetched)."""

    def __init__(self, message: str, *, status: int = 401) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class JwtIdentity:
    """Who a verified token acts as: `subject` (`jwt:<sub>`), its tenant and scopes."""

    subject: str
    tenant: str
    scopes: frozenset[str]


def jwt_header(presented: str) -> dict[str, Any] | None:
    """The JOSE header of `presented` if it has a JWT's shape (three base64url parts, the
    first a JSON object), else None: an API key or the server's token."""
    if len(presented) > MAX_TOKEN_CHARS or presented.startswith(API_KEY_PREFIX):
        return None
    parts = presented.split(".")
    if len(parts) != 3:
        return None
    head, body, signature = parts
    if not (_HEAD.fullmatch(head) and _HEAD.fullmatch(body) and _SIGNATURE.fullmatch(signature)):
        return None
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (binascii.Error, ValueError, RecursionError):  # RecursionError: nested too deep
        return None
    return header if isinstance(header, dict) else None


class JwksUnavailable(Exception):
    """The issuer's key set could not be fetched (and no copy of it is held)."""


class KeySet:
    """The issuer's JSON Web Keys by `kid`, fetched with httpx and kept `cache_seconds`.

    A lookup of an unknown `kid`, or of any once the copy is older than `cache_seconds`,
    refetches the set, unless it was fetched (or tried) less than `min_refresh_seconds`
    ago; lookups waiting meanwhile share that fetch. A failed refetch keeps the copy held.
    """

    def __init__(
        self,
        url: str,
        http: httpx.AsyncClient,
        *,
        cache_seconds: float,
        min_refresh_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self._http = http
        self._cache_seconds = cache_seconds
        self._min_refresh_seconds = min_refresh_seconds
        self._clock = clock
        self._keys: dict[str, dict[str, Any]] = {}
        self._fetched_at: float | None = None  # the last fetch that succeeded
        self._tried_at: float | None = None  # the last fetch, whatever its outcome
        self._error: str | None = None  # why the last fetch failed, if it did
        self._lock = asyncio.Lock()
        self.fetches = 0  # fetches tried, for operators and tests

    def _fresh(self, now: float) -> bool:
        return self._fetched_at is not None and now - self._fetched_at < self._cache_seconds

    def _may_fetch(self, now: float) -> bool:
        return self._tried_at is None or now - self._tried_at >= self._min_refresh_seconds

    async def key(self, kid: str) -> dict[str, Any] | None:
        """The JWK named `kid`, or None if the issuer's set (refetched if allowed) lacks it;
        JwksUnavailable when it is unknown and the set cannot be fetched."""
        if kid in self._keys and self._fresh(self._clock()):
            return self._keys[kid]
        async with self._lock:
            now = self._clock()
            if kid in self._keys and self._fresh(now):
                return self._keys[kid]  # fetched while this lookup waited
            if self._may_fetch(now):
                await self._fetch(now)
            if kid in self._keys:
                return self._keys[kid]
            if self._error is not None:
                raise JwksUnavailable(self._error)
            return None

    async def _fetch(self, now: float) -> None:
        self._tried_at = now
        self.fetches += 1
        try:
            keys = await self._download()
        except JwksUnavailable as err:
            self._error = str(err)
            log.warning("%s%s", err, "; keeping the keys fetched before" if self._keys else "")
            return
        self._keys, self._fetched_at, self._error = keys, now, None

    async def _download(self) -> dict[str, dict[str, Any]]:
        try:
            reply = await self._http.get(self.url, timeout=FETCH_TIMEOUT_SECONDS)
        except httpx.HTTPError as err:
            raise JwksUnavailable(
                f"could not fetch the JWKS {self.url}: {type(err).__name__}"
            ) from None
        if reply.status_code != 200:
            raise JwksUnavailable(f"the JWKS {self.url} answered {reply.status_code}")
        if len(reply.content) > MAX_JWKS_BYTES:
            raise JwksUnavailable(f"the JWKS {self.url} is over {MAX_JWKS_BYTES} bytes")
        try:
            document = reply.json()
        except ValueError:
            raise JwksUnavailable(f"the JWKS {self.url} is not JSON") from None
        listed = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(listed, list):
            raise JwksUnavailable(f"the JWKS {self.url} has no 'keys' list")
        keys: dict[str, dict[str, Any]] = {}
        for entry in listed:
            usable = (
                isinstance(entry, dict)
                and isinstance(entry.get("kid"), str)
                and entry.get("kty") in KEY_TYPES
                and entry.get("use", "sig") == "sig"
            )
            if usable:
                keys[entry["kid"]] = entry
        return keys


class JwtVerifier:
    """Verifies a JWT bearer against one issuer, audience and key set, and reads its
    subject, tenant and scopes (module docstring)."""

    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        jwks_url: str,
        tenant_claim: str = "tenant",
        scopes_claim: str = "scope",
        scope_prefix: str = "",
        algorithms: tuple[str, ...] = ("RS256", "ES256"),
        leeway_seconds: float = 30,
        cache_seconds: float = 300,
        min_refresh_seconds: float = 30,
        http: httpx.AsyncClient | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not issuer or not audience or not jwks_url:
            raise ValueError("a JWT verifier needs an issuer, an audience and a JWKS URL")
        if not algorithms:
            raise ValueError("a JWT verifier needs at least one algorithm")
        refused = [name for name in algorithms if name not in ASYMMETRIC_ALGORITHMS]
        if refused:
            raise ValueError(
                f"JWT algorithms {', '.join(refused)} are not allowed; allowed: "
                f"{', '.join(sorted(ASYMMETRIC_ALGORITHMS))}"
            )
        self.issuer = issuer
        self.audience = audience
        self.tenant_claim = tenant_claim
        self.scopes_claim = scopes_claim
        self.scope_prefix = scope_prefix
        self.algorithms = tuple(algorithms)
        self.leeway_seconds = leeway_seconds
        self._own_http = http is None
        self._http = http or httpx.AsyncClient(follow_redirects=False)
        self.keys = KeySet(
            jwks_url,
            self._http,
            cache_seconds=cache_seconds,
            min_refresh_seconds=min_refresh_seconds,
            clock=clock,
        )

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def verify(self, token: str, header: Mapping[str, Any]) -> JwtIdentity:
        """The identity `token` (whose header `jwt_header` read) proves; JwtRefused saying
        why not."""
        alg = header.get("alg")
        if alg not in self.algorithms:
            raise JwtRefused(
                f"JWT algorithm {alg!r} is not allowed (allowed: {', '.join(self.algorithms)})"
            )
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise JwtRefused("JWT header names no key ('kid')")
        try:
            jwk = await self.keys.key(kid)
        except JwksUnavailable as err:
            raise JwtRefused(f"{err}; retry", status=503) from None
        if jwk is None:
            raise JwtRefused(f"JWT key {kid!r} is not in the issuer's key set")
        if jwk.get("alg", alg) != alg:
            raise JwtRefused(f"JWT algorithm {alg!r} does not match key {kid!r} ({jwk['alg']})")
        try:
            key = jwt.PyJWK(jwk, algorithm=str(alg))
        except jwt.PyJWTError:
            raise JwtRefused(f"JWT key {kid!r} is not a {alg} key") from None
        claims = self._decode(token, key)
        return JwtIdentity(
            subject=_subject(claims),
            tenant=self._tenant(claims),
            scopes=self._scopes(claims),
        )

    def _decode(self, token: str, key: jwt.PyJWK) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key=key,
                algorithms=list(self.algorithms),
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway_seconds,
                options={"require": ["exp", "iss", "aud", "sub"]},
            )
        except jwt.MissingRequiredClaimError as err:
            raise JwtRefused(f"JWT claim {err.claim!r} is missing") from None
        except jwt.ExpiredSignatureError:
            raise JwtRefused("JWT has expired (exp)") from None
        except jwt.ImmatureSignatureError as err:
            claim = "iat" if "iat" in str(err) else "nbf"
            raise JwtRefused(f"JWT is not valid yet ({claim})") from None
        except jwt.InvalidAudienceError:
            raise JwtRefused(f"JWT audience is not {self.audience!r} (aud)") from None
        except jwt.InvalidIssuerError:
            raise JwtRefused(f"JWT issuer is not {self.issuer!r} (iss)") from None
        except jwt.InvalidSignatureError:
            raise JwtRefused("JWT signature does not verify") from None
        except jwt.PyJWTError as err:
            raise JwtRefused(f"JWT refused: {err}") from None
        return claims

    def _tenant(self, claims: Mapping[str, Any]) -> str:
        value = claims.get(self.tenant_claim)
        if value is None:
            raise JwtRefused(f"JWT claim {self.tenant_claim!r} (the tenant) is missing")
        if not isinstance(value, str):
            raise JwtRefused(f"JWT claim {self.tenant_claim!r} must be a string")
        try:
            return check_tenant(value)
        except ValueError as err:
            raise JwtRefused(f"JWT claim {self.tenant_claim!r}: {err}") from None

    def _scopes(self, claims: Mapping[str, Any]) -> frozenset[str]:
        """The claim's weft scopes; an unknown one refuses the token rather than being
        dropped, so a misspelt grant is seen at once instead of as a puzzling 403."""
        name = self.scopes_claim
        value = claims.get(name)
        if value is None:
            raise JwtRefused(f"JWT claim {name!r} (the scopes) is missing")
        if isinstance(value, str):
            entries = value.split()
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            entries = list(value)
        else:
            raise JwtRefused(
                f"JWT claim {name!r} must be a space-separated string or a list of strings"
            )
        if self.scope_prefix:
            prefix = self.scope_prefix
            entries = [e.removeprefix(prefix) for e in entries if e.startswith(prefix)]
        unknown = [e for e in entries if e not in SCOPES]
        if unknown:
            raise JwtRefused(
                f"JWT claim {name!r} holds unknown scopes {', '.join(map(repr, unknown))} "
                f"(known: {', '.join(SCOPES)})"
            )
        return frozenset(entries)


def _subject(claims: Mapping[str, Any]) -> str:
    """`jwt:<sub>`, so a token's subject never reads as a key id or `token`; a long one
    keeps its start and a digest of the whole, to fit the audit log."""
    sub = claims.get("sub")
    if not isinstance(sub, str) or not sub:
        raise JwtRefused("JWT claim 'sub' must be a non-empty string")
    subject = SUBJECT_PREFIX + sub
    if len(subject) <= SUBJECT_LENGTH:
        return subject
    digest = hashlib.sha256(sub.encode()).hexdigest()[:16]
    return f"{subject[: SUBJECT_LENGTH - 17]}~{digest}"


__all__ = [
    "ASYMMETRIC_ALGORITHMS",
    "JwksUnavailable",
    "JwtIdentity",
    "JwtRefused",
    "JwtVerifier",
    "KeySet",
    "jwt_header",
]
