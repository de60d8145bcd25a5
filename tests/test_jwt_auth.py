"""OIDC/JWT bearer tokens for `weft serve` (docs/tenants.md, "JWT bearer tokens").

A real JWKS endpoint on loopback (a tiny HTTP server with TCP_NODELAY) serves an RSA and
an EC public key; tokens are signed with the private keys. Against a real `weft serve` app
(uvicorn on loopback, the session's dev server, a worker on the scripted model): a token
acts for the tenant and with the scopes its claims name, and is audited as `jwt:<sub>`;
every way a token can be wrong is a 401 saying which; a rotated key is picked up by one
refetch, and a flood of made-up key ids fetches the set at most once; a bad `serve.jwt`
is refused at start, naming the field.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm
from support import add_script, agent_definitions
from temporalio.client import Client

from weft.api import create_api
from weft.api.context import ApiContext
from weft.api.event_feed import open_event_feed
from weft.api.gateway import GatewayServer
from weft.api.jwt_auth import JwtRefused, JwtVerifier, jwt_header
from weft.cli.main import run as weft_cli
from weft.cli.serve_command import jwt_verifier
from weft.client.threads import Threads
from weft.store import Store
from weft.workers.config import ConfigError, WeftConfig, load_config
from weft.workers.dev_server import free_port

ISSUER = "https://issuer.example"
AUDIENCE = "weft-api"
TOKEN = "jwt-test-admin-token"
SCRIPT = {"turns": [{"replies": [{"text": "hi there"}]}]}
RW = "threads:read threads:write"

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ROTATED_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
FORGER_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def _jwk(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey, kid: str, **extra: str) -> Any:
    public = key.public_key()
    if isinstance(public, rsa.RSAPublicKey):
        data = RSAAlgorithm.to_jwk(public, as_dict=True)
    else:
        data = ECAlgorithm.to_jwk(public, as_dict=True)
    return {**data, "kid": kid, "use": "sig", **extra}


# rsa-1 names no `alg` (the token's RS256 is used); ec-1 is bound to ES256.
RSA_JWK = _jwk(RSA_KEY, "rsa-1")
EC_JWK = _jwk(EC_KEY, "ec-1", alg="ES256")
ROTATED_JWK = _jwk(ROTATED_KEY, "rsa-2")


class JwksServer:
    """The issuer's key set over HTTP on loopback; `keys` may change between requests."""

    def __init__(self, keys: list[dict[str, Any]]) -> None:
        self.keys = keys
        self.requests = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> JwksServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/.well-known/jwks.json"  # kept once stopped
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            return
        self.requests += 1
        body = json.dumps({"keys": self.keys}).encode()
        head = (
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        writer.write(head.encode() + body)
        await writer.drain()
        writer.close()


@dataclass
class Clock:
    """The verifier's monotonic clock, moved by the test (key-set caching and refetches)."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Stack:
    url: str
    store: Store
    verifier: JwtVerifier | None


@asynccontextmanager
async def _serve(
    client: Client, config: WeftConfig, task_queue: str, verifier: JwtVerifier | None
) -> AsyncIterator[Stack]:
    store = Store.open(config.store_url())
    feed = await open_event_feed(store)
    ctx = ApiContext(
        store=store,
        client=client,
        threads=Threads(client, task_queue=task_queue, store=store),
        feed=feed,
        task_queue=task_queue,
    )
    try:
        async with GatewayServer(create_api(ctx, TOKEN, jwt=verifier), port=0) as server:
            yield Stack(server.url, store, verifier)
    finally:
        if verifier is not None:
            await verifier.aclose()
        await feed.close()
        store.close()


def _verifier(jwks: JwksServer, clock: Clock | None = None) -> JwtVerifier:
    return JwtVerifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks.url, clock=clock or Clock())


def _claims(**claims: Any) -> dict[str, Any]:
    """Valid claims for acme's alice, changed by `claims` (None removes one)."""
    now = int(time.time())
    base: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "tenant": "acme",
        "scope": RW,
        "iat": now,
        "exp": now + 300,
    }
    base.update(claims)
    return {name: value for name, value in base.items() if value is not None}


def _token(key: Any = RSA_KEY, kid: str | None = "rsa-1", alg: str = "RS256", **claims: Any) -> str:
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(_claims(**claims), key, algorithm=alg, headers=headers)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unsigned(header: dict[str, Any], **claims: Any) -> str:
    """`header.claims.` with no signature, as an `alg: none` token is sent."""
    return f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(_claims(**claims)).encode())}."


def _hs256_with_public_key() -> str:
    """An HS256 token keyed with rsa-1's public key (PEM), the classic confusion attack."""
    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    unsigned = _unsigned({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"})[:-1]
    signature = hmac.new(pem, unsigned.encode(), hashlib.sha256).digest()
    return f"{unsigned}.{_b64(signature)}"


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_jwt_acts_for_its_tenant_with_its_scopes(
    start_worker, temporal_client, weft_config, scripted_server
):
    """RSA- and EC-signed tokens act for the tenants their claims name: each reaches only
    its tenant's threads (another's is 404 as an unknown one), a missing scope is 403
    naming it, the audit log names `jwt:<sub>`; API keys and the server's token still
    work beside them, and the key set is fetched once."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with (
        JwksServer([RSA_JWK, EC_JWK]) as jwks,
        _serve(temporal_client, weft_config, worker.task_queue, _verifier(jwks)) as stack,
    ):
        alice = _bearer(_token(sub="alice", tenant="acme"))
        bob = _bearer(_token(EC_KEY, "ec-1", "ES256", sub="bob", tenant="globex", scope=RW.split()))
        carol = _bearer(_token(sub="carol", tenant="acme", scope="threads:read"))
        api_key = stack.store.api_keys.create("acme", ["threads:read"]).secret
        async with httpx.AsyncClient(timeout=60, base_url=stack.url) as http:
            started = await http.post("/threads", json={"agent": "helper"}, headers=alice)
            assert started.status_code == 201, started.text
            ours = started.json()["threadId"]
            started = await http.post("/threads", json={"agent": "helper"}, headers=bob)
            assert started.status_code == 201, started.text
            theirs = started.json()["threadId"]
            assert stack.store.threads.tenant(ours) == "acme"
            assert stack.store.threads.tenant(theirs) == "globex"

            # Each reads its own thread; another tenant's answers exactly as an unknown one.
            assert (await http.get(f"/threads/{ours}", headers=alice)).status_code == 200
            assert (await http.get(f"/threads/{theirs}", headers=bob)).status_code == 200
            unknown = f"helper-{uuid.uuid4().hex[:12]}"
            foreign = await http.get(f"/threads/{theirs}", headers=alice)
            missing = await http.get(f"/threads/{unknown}", headers=alice)
            assert foreign.status_code == missing.status_code == 404
            assert foreign.json() == {"error": f"no thread {theirs!r}", "fields": []}
            crossed = await http.post(
                f"/threads/{ours}/messages", json={"content": "x"}, headers=bob
            )
            assert crossed.status_code == 404, crossed.text

            # Scopes come from the claim: a read-only token reads, and may not steer.
            assert (await http.get(f"/threads/{ours}", headers=carol)).status_code == 200
            refused = await http.post(
                f"/threads/{ours}/messages", json={"content": "x"}, headers=carol
            )
            assert refused.status_code == 403
            assert refused.json()["error"] == (
                "JWT jwt:carol lacks the scope 'threads:write' that POST "
                "/threads/{thread_id}/messages needs"
            )
            sent = await http.post(
                f"/threads/{ours}/messages", json={"content": "hello"}, headers=alice
            )
            assert sent.status_code == 202, sent.text

            # An API key (`weft.<id>.<secret>`) is not taken for a JWT; the token is admin.
            assert jwt_header(api_key) is None
            by_key = await http.get(f"/threads/{ours}", headers=_bearer(api_key))
            assert by_key.status_code == 200, by_key.text
            by_admin = await http.get(f"/threads/{theirs}", headers=_bearer(TOKEN))
            assert by_admin.status_code == 200

        # Who did each control action: the token's subject, its tenant, the outcome.
        done = [(e.subject, e.tenant, e.route, e.status) for e in stack.store.audit.list()]
        messages = "/threads/{thread_id}/messages"
        assert ("jwt:alice", "acme", "/threads", 201) in done
        assert ("jwt:bob", "globex", "/threads", 201) in done
        assert ("jwt:alice", "acme", messages, 202) in done
        assert ("jwt:carol", "acme", messages, 403) in done
        assert ("jwt:bob", "globex", messages, 404) in done
        assert [e.route for e in stack.store.audit.list(subject="jwt:alice")] == [
            "/threads",
            messages,
        ]
        assert jwks.requests == 1  # both keys came in one fetch, kept since


async def test_every_wrong_jwt_is_refused_saying_why(temporal_client, weft_config):
    """Wrong audience or issuer, expired, not yet valid, a bad signature, `alg: none`, an
    HS256 keyed with the public key, a missing tenant, subject or expiry, an unknown scope:
    401 each, with the reason; a token a few seconds past `exp` is within the leeway."""
    now = int(time.time())
    tampered_parts = _token().split(".")
    tampered_parts[1] = _b64(json.dumps(_claims(tenant="globex")).encode())
    cases = {
        "audience": (_token(aud="another-api"), "JWT audience is not 'weft-api' (aud)"),
        "issuer": (
            _token(iss="https://evil.example"),
            "JWT issuer is not 'https://issuer.example' (iss)",
        ),
        "expired": (_token(exp=now - 3600), "JWT has expired (exp)"),
        "not yet valid": (_token(nbf=now + 3600), "JWT is not valid yet (nbf)"),
        "forged": (_token(FORGER_KEY), "JWT signature does not verify"),
        "tampered": (".".join(tampered_parts), "JWT signature does not verify"),
        "alg none": (
            _unsigned({"alg": "none", "typ": "JWT", "kid": "rsa-1"}),
            "JWT algorithm 'none' is not allowed (allowed: RS256, ES256)",
        ),
        "hs256": (
            _hs256_with_public_key(),
            "JWT algorithm 'HS256' is not allowed (allowed: RS256, ES256)",
        ),
        "alg for another key": (
            _token(RSA_KEY, "ec-1", "RS256"),
            "JWT algorithm 'RS256' does not match key 'ec-1' (ES256)",
        ),
        "no kid": (_token(kid=None), "JWT header names no key ('kid')"),
        "unknown kid": (_token(kid="nobody"), "JWT key 'nobody' is not in the issuer's key set"),
        "no tenant": (_token(tenant=None), "JWT claim 'tenant' (the tenant) is missing"),
        "bad tenant": (_token(tenant="a b"), "JWT claim 'tenant': tenant 'a b': 1 to 64"),
        "no sub": (_token(sub=None), "JWT claim 'sub' is missing"),
        "no exp": (_token(exp=None), "JWT claim 'exp' is missing"),
        "no scopes": (_token(scope=None), "JWT claim 'scope' (the scopes) is missing"),
        "unknown scope": (
            _token(scope="threads:read deploy:all"),
            "JWT claim 'scope' holds unknown scopes 'deploy:all' (known: threads:read, "
            "threads:write, actions:respond, tasks:read, tasks:write, admin)",
        ),
        "scope not text": (
            _token(scope={"threads:read": True}),
            "JWT claim 'scope' must be a space-separated string or a list of strings",
        ),
    }
    async with (
        JwksServer([RSA_JWK, EC_JWK]) as jwks,
        _serve(
            temporal_client, weft_config, weft_config.temporal.task_queue, _verifier(jwks)
        ) as stack,
        httpx.AsyncClient(timeout=60, base_url=stack.url) as http,
    ):
        for name, (token, reason) in cases.items():
            assert jwt_header(token) is not None, name
            reply = await http.get("/openapi.json", headers=_bearer(token))
            assert reply.status_code == 401, (name, reply.text)
            assert reply.json()["error"].startswith(reason), (name, reply.json())
            assert reply.headers["www-authenticate"] == 'Bearer realm="weft"'
        # The same token within the leeway (5 s past `exp`, 30 s allowed) is accepted.
        late = await http.get("/openapi.json", headers=_bearer(_token(exp=now - 5)))
        assert late.status_code == 200, late.text
        # One fetch for all of them: the unknown kid came too soon after it to refetch.
        assert jwks.requests == 1

    # A server without `serve.jwt` says so rather than treating a JWT as a wrong key.
    async with (
        _serve(temporal_client, weft_config, weft_config.temporal.task_queue, None) as plain,
        httpx.AsyncClient(timeout=60, base_url=plain.url) as http,
    ):
        reply = await http.get("/openapi.json", headers=_bearer(_token()))
        assert reply.status_code == 401
        assert reply.json()["error"] == (
            "JWT bearer tokens are not accepted here (serve.jwt is not configured)"
        )

    # HS* and `none` cannot even be configured.
    for algorithm in ("HS256", "none"):
        with pytest.raises(ValueError, match=f"JWT algorithms {algorithm} are not allowed"):
            JwtVerifier(
                issuer=ISSUER, audience=AUDIENCE, jwks_url="https://x", algorithms=(algorithm,)
            )


async def test_a_rotated_key_is_fetched_once_and_made_up_kids_do_not_hammer(
    temporal_client, weft_config
):
    """The key set is kept by kid: a new kid is picked up by one refetch (once the last
    fetch is `min_refresh_seconds` old), a key dropped from the set is refused, a flood of
    made-up kids fetches at most once, an old copy is refetched after `cache_seconds`, and
    an unreachable set is a 503 naming it."""
    clock = Clock()
    queue = weft_config.temporal.task_queue
    async with (
        JwksServer([RSA_JWK]) as jwks,
        _serve(temporal_client, weft_config, queue, _verifier(jwks, clock)) as stack,
        httpx.AsyncClient(timeout=60, base_url=stack.url) as http,
    ):

        async def status(token: str) -> int:
            return (await http.get("/openapi.json", headers=_bearer(token))).status_code

        async def flood() -> list[int]:
            tokens = [_token(kid=f"made-up-{n}") for n in range(20)]
            return list(await asyncio.gather(*(status(t) for t in tokens)))

        assert await status(_token()) == 200
        assert jwks.requests == 1
        assert await flood() == [401] * 20
        assert jwks.requests == 1  # fetched just now: no refetch for any of them

        # The issuer rotates to rsa-2 and drops rsa-1.
        jwks.keys = [ROTATED_JWK]
        rotated = _token(ROTATED_KEY, "rsa-2")
        assert await status(rotated) == 401  # not refetched yet: the last fetch is recent
        clock.now += 30
        assert await status(rotated) == 200
        assert jwks.requests == 2
        assert await status(_token()) == 401  # rsa-1 is gone from the set
        assert jwks.requests == 2

        # Later, a flood of made-up kids: one fetch between them all.
        clock.now += 30
        assert await flood() == [401] * 20
        assert jwks.requests == 3

        # A copy older than `cache_seconds` is refetched at its next use.
        clock.now += 301
        assert await status(rotated) == 200
        assert jwks.requests == 4

        # The endpoint goes away: the copy held still serves its keys; an unknown kid is a
        # 503 naming the set, since whether it is valid cannot be known.
        await jwks.stop()
        clock.now += 301
        assert await status(rotated) == 200
        clock.now += 30
        reply = await http.get("/openapi.json", headers=_bearer(_token(kid="rsa-3")))
        assert reply.status_code == 503
        assert reply.json()["error"].startswith(f"could not fetch the JWKS {jwks.url}")
        assert stack.verifier is not None and stack.verifier.keys.fetches == 6


def test_a_jwt_is_told_from_keys_and_tokens_by_its_shape():
    """Three base64url parts, the first a JSON object: a JWT (even an unsigned one, to be
    refused by name); an API key, an opaque token, or a part that is not JSON is not."""
    assert jwt_header(_token()) == {"alg": "RS256", "kid": "rsa-1", "typ": "JWT"}
    assert jwt_header(_unsigned({"alg": "none"})) == {"alg": "none"}
    head = _b64(b'{"alg": "RS256"}')
    not_jwts = [
        "weft.k0123456789abcdef.FD6gWrI9u4UIr4DkRzho30hK_xWiydJf2z7TBu7zFMI",
        f"weft.{head[5:]}.abc",  # an API key's shape, whatever follows
        "test-api-token",
        f"{head}.e30",  # two parts
        f"{head}.e30.sig.more",  # four (a JWE has five)
        f"{_b64(b'[1, 2]')}.e30.sig",  # JSON, but not an object
        f"{_b64(b'[' * 5000)}.e30.sig",  # nested past the parser's depth
        f"{head}.e3 0.sig",  # not base64url
        f"{head}.{'a' * 17000}.sig",  # longer than any token weft reads
    ]
    for presented in not_jwts:
        assert jwt_header(presented) is None, presented


async def test_scope_prefix_and_long_subjects():
    """With `scopePrefix`, only the claim's prefixed entries are weft's (an IdP's
    `openid`, `profile` are ignored, a prefixed unknown one still refused); a long `sub`
    keeps its start and a digest of the whole, to fit the audit log."""
    async with JwksServer([RSA_JWK]) as jwks:
        verifier = JwtVerifier(
            issuer=ISSUER,
            audience=AUDIENCE,
            jwks_url=jwks.url,
            tenant_claim="org",
            scopes_claim="permissions",
            scope_prefix="weft/",
        )
        try:

            async def verify(token: str) -> Any:
                header = jwt_header(token)
                assert header is not None
                return await verifier.verify(token, header)

            granted = ["openid", "profile", "weft/threads:read", "weft/actions:respond"]
            who = await verify(_token(org="acme", permissions=granted))
            assert who.scopes == {"threads:read", "actions:respond"}
            assert (who.subject, who.tenant) == ("jwt:alice", "acme")
            with pytest.raises(JwtRefused, match="unknown scopes 'deploy'"):
                await verify(_token(org="acme", permissions="openid weft/deploy"))
            with pytest.raises(JwtRefused, match="JWT claim 'org' \\(the tenant\\) is missing"):
                await verify(_token(permissions="weft/threads:read"))

            long_sub = "auth0|" + "x" * 100
            long_who = await verify(_token(sub=long_sub, org="acme", permissions=[]))
            digest = hashlib.sha256(long_sub.encode()).hexdigest()[:16]
            assert long_who.subject == f"jwt:{long_sub}"[:47] + "~" + digest
            assert len(long_who.subject) == 64 and long_who.scopes == frozenset()
        finally:
            await verifier.aclose()


async def test_weft_serve_accepts_the_configured_issuers_jwts(tmp_path, dev_server):
    """`weft serve` as a process, with `serve.jwt` in its config: it names the issuer at
    start, and a token signed by the JWKS's key is accepted, one for another audience not."""
    port = free_port()
    async with JwksServer([EC_JWK]) as jwks:
        config = tmp_path / "serve.yml"
        section = {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": jwks.url}
        config.write_text(
            yaml.safe_dump(
                {
                    "temporal": {"address": dev_server.address},
                    "store": {"url": f"sqlite:///{tmp_path / 'weft.db'}"},
                    "serve": {"jwt": section},
                }
            )
        )
        process = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "weft"),
            *("--config", str(config), "serve", "--port", str(port)),
            env={**os.environ, "WEFT_GATEWAY_TOKEN": TOKEN},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert process.stdout is not None
        seen: list[str] = []
        try:
            while not any("JWTs of" in line for line in seen):
                line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
                assert line, f"weft serve exited: {''.join(seen)}"
                seen.append(line)
            banner = seen[-1].strip()
            assert banner == (
                f"weft serve: JWTs of {ISSUER} for {AUDIENCE} (keys {jwks.url}; RS256, ES256)"
            )
            async with httpx.AsyncClient(timeout=60, base_url=f"http://127.0.0.1:{port}") as http:
                token = _token(EC_KEY, "ec-1", "ES256")
                accepted = await http.get("/openapi.json", headers=_bearer(token))
                assert accepted.status_code == 200, accepted.text
                elsewhere = _token(EC_KEY, "ec-1", "ES256", aud="another-api")
                refused = await http.get("/openapi.json", headers=_bearer(elsewhere))
                assert refused.status_code == 401
                assert refused.json()["error"] == "JWT audience is not 'weft-api' (aud)"
        finally:
            process.send_signal(signal.SIGTERM)
            output, _ = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, "".join(seen) + output.decode()
        assert jwks.requests == 1


def _config_file(tmp_path: Path, jwt_section: dict[str, Any]) -> Path:
    path = tmp_path / "weft.yml"
    path.write_text(yaml.safe_dump({"serve": {"jwt": jwt_section}}))
    return path


GOOD = {"issuer": ISSUER, "audience": AUDIENCE, "jwksUrl": "https://issuer.example/jwks"}


def test_serve_jwt_config_is_read_and_bad_settings_are_refused_naming_the_field(tmp_path, capsys):
    """`serve.jwt` builds the verifier; a missing or bad field stops the config (and
    `weft serve`) at start, naming it."""
    section = {**GOOD, "tenantClaim": "org", "scopesClaim": "weft_scopes", "scopePrefix": "weft/"}
    config = load_config(_config_file(tmp_path, {**section, "algorithms": ["ES256"]}), {})
    verifier = jwt_verifier(config)
    assert verifier is not None
    assert (verifier.issuer, verifier.audience, verifier.algorithms) == (
        ISSUER,
        AUDIENCE,
        ("ES256",),
    )
    assert (verifier.tenant_claim, verifier.scopes_claim, verifier.scope_prefix) == (
        "org",
        "weft_scopes",
        "weft/",
    )
    assert verifier.keys.url == GOOD["jwksUrl"]
    empty = tmp_path / "empty.yml"
    empty.write_text("{}\n")
    assert jwt_verifier(load_config(empty, {})) is None

    bad: dict[str, dict[str, Any]] = {
        "serve.jwt.audience": {"issuer": ISSUER, "jwksUrl": GOOD["jwksUrl"]},
        "serve.jwt.algorithms.0": {**GOOD, "algorithms": ["HS256"]},
        "serve.jwt.jwksUrl": {**GOOD, "jwksUrl": "http://issuer.example/jwks"},
        "serve.jwt.leewaySeconds": {**GOOD, "leewaySeconds": -1},
        "serve.jwt.audiance": {**GOOD, "audiance": "typo"},
    }
    for field, wrong in bad.items():
        with pytest.raises(ConfigError, match=f"field '{field}'"):
            load_config(_config_file(tmp_path, wrong), {})
    with pytest.raises(ConfigError, match="http only on a loopback address"):
        load_config(_config_file(tmp_path, bad["serve.jwt.jwksUrl"]), {})

    # `weft serve` stops before serving anything, one line naming the field.
    path = _config_file(tmp_path, bad["serve.jwt.algorithms.0"])
    assert weft_cli(["--config", str(path), "serve", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"weft: {path}: field 'serve.jwt.algorithms.0'"), err
