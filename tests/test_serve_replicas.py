"""Several `weft serve` replicas behind one load balancer, as a team runs them (issue #39):
two real `weft serve` processes on one PostgreSQL database, a worker and the dev server.

A page token of `GET /threads` works at either replica and after a restart; an
`Idempotency-Key` acts once across replicas, even sent to both at the same moment; an
event stream read at one replica resumes at the other with `Last-Event-ID`, every event
once; `serve.requestLimits` holds across replicas. The unit tests below the process test
cover what needs no processes: forged and other-filter tokens, the limiter's counting.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from api_support import sse
from support import StartWorker, add_script, agent_definitions
from temporalio.client import Client

from weft.api import create_api
from weft.api.auth import Principal
from weft.api.context import ApiContext
from weft.api.gateway.app import GatewayError
from weft.api.request_limits import LimitRequests, RequestLimiter, RequestLimits
from weft.api.thread_routes import PageTokens
from weft.client.threads import Threads
from weft.store import Store
from weft.workers.config import WeftConfig
from weft.workers.dev_server import DevServer, free_port
from weft.workers.scripted_model import ScriptedModelServer

TOKEN = "replicas-admin-token"
WEFT = str(Path(sys.executable).parent / "weft")
# The limits the replicas share: low, so the test reaches them in a few requests.
PER_KEY, PER_TENANT = 3, 4


class Replica:
    """One `weft serve` process on a fixed port, stopped and started again at will."""

    def __init__(self, config: Path, name: str) -> None:
        self.config, self.name, self.port = config, name, free_port()
        self._process: asyncio.subprocess.Process | None = None
        self._output: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *(WEFT, "--config", str(self.config), "serve", "--port", str(self.port)),
            env={**os.environ, "WEFT_GATEWAY_TOKEN": TOKEN},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        assert self._process.stdout is not None
        while True:
            line = (await asyncio.wait_for(self._process.stdout.readline(), 60)).decode()
            assert line, f"replica {self.name} exited: {''.join(self._output)}"
            self._output.append(line)
            if "inbox page" in line:
                return

    async def stop(self) -> str:
        """SIGTERM, a graceful stop; everything it printed (nothing if not running)."""
        process, self._process = self._process, None
        if process is None:
            return ""
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        rest, _ = await asyncio.wait_for(process.communicate(), 60)
        printed = "".join(self._output) + rest.decode()
        self._output = []
        assert process.returncode == 0, printed
        return printed


@dataclass
class Replicas:
    a: Replica
    b: Replica
    http_a: httpx.AsyncClient
    http_b: httpx.AsyncClient
    store: Store  # the test's own view of the shared database
    temporal: Client
    agent: str


def _serve_config(tmp_path: Path, config: WeftConfig) -> Path:
    path = tmp_path / "serve.yml"
    settings = {
        "temporal": {
            "address": config.temporal.address,
            "taskQueue": config.temporal.task_queue,
        },
        "store": {"url": config.store.url},
        "serve": {"requestLimits": {"perKeyPerMinute": PER_KEY, "perTenantPerMinute": PER_TENANT}},
    }
    path.write_text(yaml.safe_dump(settings))
    return path


def _client(url: str, token: str = TOKEN) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


@asynccontextmanager
async def _replicas(
    tmp_path: Path,
    weft_config: WeftConfig,
    postgres_url: str,
    start_worker: StartWorker,
    scripted_server: ScriptedModelServer,
    temporal: Client,
) -> AsyncIterator[Replicas]:
    weft_config.store.url = postgres_url
    script = add_script(scripted_server, {"replies": [{"text": "heard you"}]})
    await start_worker(agent_definitions(script), task_queue=weft_config.temporal.task_queue)
    config = _serve_config(tmp_path, weft_config)
    a, b = Replica(config, "a"), Replica(config, "b")
    async with AsyncExitStack() as stack:
        store = stack.enter_context(Store.open(postgres_url))
        stack.push_async_callback(b.stop)
        stack.push_async_callback(a.stop)
        # Both at once, on a database the worker just migrated: neither has the shared
        # page-token key yet, so their first listings race to make it.
        await asyncio.gather(a.start(), b.start())
        http_a = await stack.enter_async_context(_client(a.url))
        http_b = await stack.enter_async_context(_client(b.url))
        yield Replicas(a, b, http_a, http_b, store, temporal, "helper")


async def _until(probe: Callable[[], Awaitable[bool]], *, seconds: float = 20) -> None:
    """`probe()` until it holds, for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not await probe():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.1)


async def test_two_replicas_share_tokens_keys_streams_and_limits(
    tmp_path: Path,
    dev_server: DevServer,
    weft_config: WeftConfig,
    postgres_databases: Callable[[], str],
    start_worker: StartWorker,
    scripted_server: ScriptedModelServer,
    temporal_client: Client,
) -> None:
    async with _replicas(
        tmp_path,
        weft_config,
        postgres_databases(),
        start_worker,
        scripted_server,
        temporal_client,
    ) as replicas:
        assert await _idempotency_across_replicas(replicas) == 1  # started once, under the key
        await _stream_resumed_at_the_other_replica(replicas)
        await _page_tokens_at_either_replica_and_after_a_restart(replicas)
        await _limits_held_across_replicas(replicas)


async def _idempotency_across_replicas(replicas: Replicas) -> int:
    """The checks of one key at both replicas; how often its thread started."""
    a, b = replicas.http_a, replicas.http_b
    body = {"agent": replicas.agent, "messages": ["hello"]}

    # One key at A, then at B: B replays A's reply, and no second thread starts.
    key = {"Idempotency-Key": f"seq-{uuid.uuid4()}"}
    first = await a.post("/threads", json=body, headers=key)
    assert first.status_code == 201, first.text
    again = await b.post("/threads", json=body, headers=key)
    assert again.status_code == 201 and again.headers.get("idempotent-replayed") == "true"
    assert again.json() == first.json()

    # One key at both at the same moment: one acts, the other is told to retry (409), and
    # the retry gets the one reply.
    key = {"Idempotency-Key": f"race-{uuid.uuid4()}"}
    raced = await asyncio.gather(
        a.post("/threads", json=body, headers=key), b.post("/threads", json=body, headers=key)
    )
    statuses = sorted(reply.status_code for reply in raced)
    started = [reply.json()["threadId"] for reply in raced if reply.status_code == 201]
    assert statuses in ([201, 409], [201, 201]), [reply.text for reply in raced]
    assert len(set(started)) == 1, started
    for http in (a, b):
        retried = await http.post("/threads", json=body, headers=key)
        assert retried.status_code == 201 and retried.json()["threadId"] == started[0]
        assert retried.headers.get("idempotent-replayed") == "true"

    # The one thread runs its turn, started once under the key's id.
    def types() -> list[str]:
        return [event.type for event in replicas.store.events.read(started[0])]

    async def turn_done() -> bool:
        return "turn.completed" in await asyncio.to_thread(types)

    await _until(turn_done)
    return types().count("thread.started")


async def _stream_resumed_at_the_other_replica(replicas: Replicas) -> None:
    a, b = replicas.http_a, replicas.http_b
    started = await a.post("/threads", json={"agent": replicas.agent, "messages": ["one"]})
    thread_id = started.json()["threadId"]
    async with sse(a, thread_id) as stream:
        await stream.read_until(_is("turn.completed"))
    at_a = stream.events()

    sent = await b.post(f"/threads/{thread_id}/messages", json={"content": "two"})
    assert sent.status_code == 202, sent.text
    resume = {"Last-Event-ID": at_a[-1]["id"]}
    async with sse(b, thread_id, **resume) as stream:
        await stream.read_until(_is("turn.completed"))
        ended = await b.post(f"/threads/{thread_id}/terminate", json={"reason": "done"})
        assert ended.status_code == 202, ended.text
        await stream.read_until(_is("end"))
    at_b = stream.events()

    sequences = [int(event["id"]) for event in at_a + at_b]
    stored = [event.sequence for event in replicas.store.events.read(thread_id)]
    assert sequences == stored == list(range(1, len(stored) + 1)), "every event once, in order"


async def _page_tokens_at_either_replica_and_after_a_restart(replicas: Replicas) -> None:
    a, b = replicas.http_a, replicas.http_b
    session = f"pages-{uuid.uuid4().hex[:8]}"
    ids = set()
    for _ in range(3):
        reply = await b.post("/threads", json={"agent": replicas.agent, "sessionId": session})
        ids.add(reply.json()["threadId"])

    async def listed_all() -> bool:
        page = (await a.get("/threads", params={"session": session})).json()
        return {t["threadId"] for t in page["threads"]} == ids

    await _until(listed_all)
    first = (await a.get("/threads", params={"session": session, "limit": 1})).json()
    token = first["nextPageToken"]
    assert token

    # B honours A's token; a token for other filters stays refused at either replica.
    at_b = await b.get("/threads", params={"session": session, "limit": 1, "pageToken": token})
    assert at_b.status_code == 200, at_b.text
    for http in (a, b):
        other = await http.get("/threads", params={"session": "other", "pageToken": token})
        assert other.status_code == 422 and other.json()["fields"] == ["pageToken"]

    # A restarted replica honours the tokens it gave before.
    printed = await replicas.a.stop()
    await replicas.a.start()
    seen = [t["threadId"] for t in first["threads"]]
    while token:
        page = await a.get("/threads", params={"session": session, "limit": 1, "pageToken": token})
        assert page.status_code == 200, page.text
        seen += [t["threadId"] for t in page.json()["threads"]]
        token = page.json()["nextPageToken"]
    assert sorted(seen) == sorted(ids)
    # The key behind the tokens never leaves the store.
    key = replicas.store.serve_secrets.get("page-tokens")
    assert key.hex() not in printed and key.hex() not in first["nextPageToken"]


async def _limits_held_across_replicas(replicas: Replicas) -> None:
    key_1 = replicas.store.api_keys.create("acme", ["threads:read"])
    key_2 = replicas.store.api_keys.create("acme", ["threads:read"])
    async with AsyncExitStack() as stack:
        one = [
            await stack.enter_async_context(_client(r.url, key_1.secret))
            for r in (replicas.a, replicas.b)
        ]
        two = [
            await stack.enter_async_context(_client(r.url, key_2.secret))
            for r in (replicas.a, replicas.b)
        ]
        # The first key's three requests a minute, spread over both replicas: a fourth is
        # refused wherever it lands.
        for http in (one[0], one[1], one[0]):
            assert (await http.get("/threads")).status_code == 200
        refused = await one[1].get("/threads")
        assert refused.status_code == 429, refused.text
        assert f"key {key_1.key.key_id}" in refused.json()["error"]
        assert "perKeyPerMinute" in refused.json()["error"]
        assert 1 <= int(refused.headers["retry-after"]) <= 61
        # The tenant's four: the second key has one left, on either replica.
        assert (await two[1].get("/threads")).status_code == 200
        over = await two[0].get("/threads")
        assert over.status_code == 429 and "perTenantPerMinute" in over.json()["error"]
        assert "tenant acme" in over.json()["error"]
        # Not counted: health, and the server's own token.
        probe = one[0].build_request("GET", "/healthz")
        del probe.headers["Authorization"]
        assert (await one[0].send(probe)).status_code == 200
        assert (await replicas.http_b.get("/threads")).status_code == 200


def _is(event_type: str) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message.get("event") == event_type


# -- without processes ---------------------------------------------------------------------


async def test_page_tokens_hold_across_stores_and_refuse_forgeries(
    tmp_path: Path, postgres_databases: Callable[[], str]
) -> None:
    """A token sealed through one `Store` (a replica) opens through another on the same
    database (another replica, or the same after a restart); one for another query, a
    tampered one, or one sealed on another database is 422 naming `pageToken`."""
    url = f"sqlite:///{tmp_path / 'a.db'}"
    query, other_query = "WeftSession = 's1'", "WeftSession = 's2'"
    with Store.open(url) as first, Store.open(url) as second:
        sealed = await PageTokens(first).seal(query, b"temporal-token")
        assert await PageTokens(second).open(query, sealed) == b"temporal-token"
        tampered = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
        with Store.open(f"sqlite:///{tmp_path / 'b.db'}") as elsewhere:
            foreign = await PageTokens(elsewhere).seal(query, b"temporal-token")
        refusals = [(query, tampered), (other_query, sealed), (query, foreign), (query, "%%")]
        for asked, text in refusals:
            with pytest.raises(GatewayError) as refused:
                await PageTokens(second).open(asked, text)
            assert refused.value.status == 422 and refused.value.body.fields == ["pageToken"]
            assert "first page" in refused.value.body.error


def test_replicas_starting_at_once_make_one_key(postgres_databases: Callable[[], str]) -> None:
    """Four replicas asking for the key of a fresh database at once all read one key."""
    url = postgres_databases()
    Store.open(url).close()  # migrated once, as the first replica to start does
    stores = [Store.open(url, migrate=False) for _ in range(4)]
    keys: list[bytes] = []
    start = threading.Barrier(len(stores))

    def ask(store: Store) -> None:
        start.wait()
        keys.append(store.serve_secrets.get("page-tokens"))

    threads = [threading.Thread(target=ask, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for store in stores:
        store.close()
    assert len(keys) == 4 and len(set(keys)) == 1 and len(keys[0]) == 32


def test_limiter_counts_each_key_and_its_tenant(tmp_path: Path) -> None:
    """Each credential within its own limit, and all of a tenant's within the tenant's;
    a request refused at the tenant gives its key's place back."""
    with Store.open(f"sqlite:///{tmp_path / 'w.db'}") as store:
        limiter = RequestLimiter(store, RequestLimits(per_key=2, per_tenant=3))
        one = Principal("k1", "acme", frozenset({"threads:read"}))
        two = Principal("k2", "acme", frozenset({"threads:read"}))
        other = Principal("jwt:zed", "zeta", frozenset({"threads:read"}), credential="JWT")
        assert limiter.admit(one) is None and limiter.admit(one) is None
        refused = limiter.admit(one)
        assert refused is not None and refused.message.startswith("rate limited: key k1 is at")
        assert "perKeyPerMinute" in refused.message and 1 <= refused.retry_after_seconds <= 61
        assert limiter.admit(two) is None
        at_tenant = limiter.admit(two)
        assert at_tenant is not None and "tenant acme" in at_tenant.message
        assert "perTenantPerMinute" in at_tenant.message
        assert limiter.admit(other) is None  # another tenant, another count
        with store.database.read() as connection:
            places = connection.exec_driver_sql(
                "SELECT limit_key, COUNT(*) FROM rate_limit_grants GROUP BY limit_key"
            ).all()
        assert dict(places) == {
            "serve:key:k1": 2,
            "serve:key:k2": 1,  # the refused request's place was given back
            "serve:tenant:acme": 3,
            "serve:key:jwt:zed": 1,
            "serve:tenant:zeta": 1,
        }


def test_replicas_counting_at_once_admit_no_more_than_the_limit(
    postgres_databases: Callable[[], str],
) -> None:
    """Four replicas (stores) counting one key's requests at once admit exactly its limit."""
    url = postgres_databases()
    Store.open(url).close()
    stores = [Store.open(url, migrate=False) for _ in range(4)]
    who = Principal("k1", "acme", frozenset({"threads:read"}))
    admitted: list[bool] = []
    start = threading.Barrier(len(stores))

    def hammer(store: Store) -> None:
        limiter = RequestLimiter(store, RequestLimits(per_key=10, per_tenant=1000))
        start.wait()
        admitted.extend(limiter.admit(who) is None for _ in range(8))

    threads = [threading.Thread(target=hammer, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for store in stores:
        store.close()
    assert len(admitted) == 32 and sum(admitted) == 10


async def test_no_limits_configured_installs_no_limiter(
    tmp_path: Path, temporal_client: Client
) -> None:
    """Without a limit, no request pays a store call for one: the middleware is not there;
    with one, it sits innermost, after the credential is known."""
    with Store.open(f"sqlite:///{tmp_path / 'w.db'}") as store:
        ctx = ApiContext(
            store=store,
            client=temporal_client,
            threads=Threads(temporal_client, task_queue="none", store=store),
            feed=None,  # type: ignore[arg-type]  # no route is called
            task_queue="none",
        )
        for limits in (None, RequestLimits()):
            app = create_api(ctx, TOKEN, request_limits=limits)
            installed: list[object] = [m.cls for m in app.user_middleware]
            assert LimitRequests not in installed
        app = create_api(ctx, TOKEN, request_limits=RequestLimits(per_key=1))
        innermost: object = app.user_middleware[-1].cls
        assert innermost is LimitRequests


async def test_the_middleware_refuses_before_the_route_and_when_the_store_fails(
    tmp_path: Path,
) -> None:
    """Over the limit: 429 with Retry-After and the route never runs; a store that cannot
    count: 503 with Retry-After, never an uncounted request let through."""
    reached: list[str] = []

    async def route(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["path"])

    async def call(app: LimitRequests, path: str) -> tuple[int | None, dict[bytes, bytes]]:
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        who = Principal("k1", "acme", frozenset({"threads:read"}))
        scope = {"type": "http", "method": "GET", "path": path, "state": {"principal": who}}
        await app(scope, None, send)  # type: ignore[arg-type]
        if not sent:
            return None, {}
        return sent[0]["status"], dict(sent[0]["headers"])

    with Store.open(f"sqlite:///{tmp_path / 'w.db'}") as store:
        limiter = RequestLimiter(store, RequestLimits(per_key=1))
        app = LimitRequests(route, limiter=limiter)
        assert await call(app, "/threads") == (None, {})
        status, headers = await call(app, "/threads")
        assert status == 429 and int(headers[b"retry-after"]) >= 1
        assert await call(app, "/inbox/page.js") == (None, {})  # an asset: not counted
        assert reached == ["/threads", "/inbox/page.js"]
        with store.database.write() as connection:
            connection.exec_driver_sql("DROP TABLE rate_limit_grants")
        status, headers = await call(app, "/threads")
        assert status == 503 and headers[b"retry-after"] == b"1"
        assert reached == ["/threads", "/inbox/page.js"]
