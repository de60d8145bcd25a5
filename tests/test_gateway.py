"""`weft serve`: the §7.5 scoped-variable gateway, under uvicorn on a loopback port.

Real pieces throughout: a SQLite store with a keyring, the Temporal dev server, a probe
workflow that records its request with the `variables.request` activity and waits for the
`variables_provided` signal, and httpx as the client.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from support import agent_definitions
from temporalio import workflow
from temporalio.client import Client
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from weft.activities.crypto import Keyring, new_key, parse_keys
from weft.activities.snapshots import SnapshotCache
from weft.activities.thread_records import ThreadRecordActivities
from weft.activities.variables_request import VariableRequestActivities
from weft.api.gateway import VARIABLES_PATH, GatewayServer, create_app
from weft.api.gateway.server import NoDelayH11Protocol
from weft.contract.activities import ThreadInitInput
from weft.contract.subagents import ACTIVITY_VARIABLES_REQUEST, VariableRequest
from weft.store import Store
from weft.store.tables import threads, variable_requests
from weft.store.variable_requests import MAX_VALUE_BYTES, AlreadyProvided, NotProvided
from weft.transport.connection import with_keyring
from weft.workers.dev_server import DevServer, free_port

TOKEN = "test-gateway-token"
SECRET = "sk-live-7c1e5d0a-not-for-models"
OTHER_SECRET = "hunter2-region-eu-west"


@workflow.defn(name="GatewaySignalProbe")
class SignalProbe:
    """Stands in for a parent thread: records a request, then reports the raw signal."""

    def __init__(self) -> None:
        self._signal: dict[str, Any] | None = None

    @workflow.run
    async def run(self, request: VariableRequest) -> dict[str, Any]:
        await workflow.execute_activity(
            ACTIVITY_VARIABLES_REQUEST, request, start_to_close_timeout=timedelta(seconds=30)
        )
        await workflow.wait_condition(lambda: self._signal is not None)
        assert self._signal is not None
        return self._signal

    @workflow.signal(dynamic=True)
    async def on_signal(self, name: str, args: Sequence[RawValue]) -> None:
        payload = args[0].payload
        self._signal = {
            "name": name,
            "count": len(args),
            "encoding": payload.metadata.get("encoding", b"").decode(),
            "data": payload.data.decode(),
        }


@pytest.fixture
def keyring() -> Keyring:
    """A fresh encryption key for this test's store."""
    return parse_keys([f"k1:{new_key()}"], source="test")


@pytest.fixture
def store(tmp_path: Path, keyring: Keyring) -> Iterator[Store]:
    """A SQLite store that seals env and variable values."""
    opened = Store.open(f"sqlite:///{tmp_path / 'weft.db'}", keyring=keyring)
    yield opened
    opened.close()


@pytest.fixture
async def gateway(
    store: Store, temporal_client: Client, keyring: Keyring
) -> AsyncIterator[GatewayServer]:
    """The gateway app under uvicorn on a free loopback port, as `weft serve` builds it."""
    client = with_keyring(temporal_client, keyring)
    async with GatewayServer(create_app(store, client, TOKEN), port=0) as server:
        yield server


@pytest.fixture
async def http(gateway: GatewayServer) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of the gateway that sends the token."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=30) as client:
        yield client


@pytest.fixture
async def probe_queue(temporal_client: Client, store: Store) -> AsyncIterator[str]:
    """A worker for the probe workflow and `variables.request`, on its own task queue."""
    queue = f"tq-{uuid.uuid4().hex[:12]}"
    worker = Worker(
        temporal_client,
        task_queue=queue,
        workflows=[SignalProbe],
        activities=[VariableRequestActivities(store).request_variables],
        # The probe lives in this module, whose imports (uvicorn, httpx) the sandbox refuses.
        workflow_runner=UnsandboxedWorkflowRunner(),
    )
    async with worker:
        yield queue


def _request(parent: str | None = None, *missing: str) -> VariableRequest:
    return VariableRequest(
        request_id=f"vr-{uuid.uuid4().hex[:12]}",
        parent_thread_id=parent or f"parent-{uuid.uuid4().hex[:12]}",
        tool_call_id="call-1",
        subagent="researcher",
        name="Research EU pricing",
        missing=list(missing or ("API_KEY", "REGION")),
    )


def _url(request: VariableRequest, parent: str | None = None) -> str:
    return VARIABLES_PATH.format(
        parent_thread_id=parent or request.parent_thread_id, request_id=request.request_id
    )


async def _recorded(store: Store, request: VariableRequest) -> VariableRequest:
    recorded = await asyncio.to_thread(store.variable_requests.create, request)
    return recorded


async def test_post_stores_values_and_signals_the_parent(
    http: httpx.AsyncClient, temporal_client: Client, probe_queue: str, store: Store
) -> None:
    """A request recorded by the activity is served without values; POST signals its id only."""
    request = _request()
    handle = await temporal_client.start_workflow(
        SignalProbe.run, request, id=request.parent_thread_id, task_queue=probe_queue
    )
    for _ in range(200):  # the activity records the request
        shown = await http.get(_url(request))
        if shown.status_code == 200:
            break
        await asyncio.sleep(0.05)
    assert shown.status_code == 200, shown.text
    body = shown.json()
    assert set(body) == {
        "requestId",
        "parentThreadId",
        "toolCallId",
        "subagent",
        "name",
        "missing",
        "status",
        "createdAt",
    }
    assert body["status"] == "pending" and body["missing"] == ["API_KEY", "REGION"]
    assert body["requestId"] == request.request_id and body["createdAt"]

    posted = await http.post(
        _url(request), json={"values": {"API_KEY": SECRET, "REGION": OTHER_SECRET}}
    )
    assert posted.status_code == 202, posted.text
    assert posted.json() == {"requestId": request.request_id, "status": "provided"}

    received = await asyncio.wait_for(handle.result(), 30)
    assert received["name"] == "variables_provided" and received["count"] == 1
    assert received["encoding"] == "json/plain"
    assert json.loads(received["data"]) == {"requestId": request.request_id}
    after = await http.get(_url(request))
    assert after.json()["status"] == "provided"
    assert SECRET not in after.text and OTHER_SECRET not in after.text
    values = await asyncio.to_thread(store.variable_requests.provided_values, request.request_id)
    assert values == {"API_KEY": SECRET, "REGION": OTHER_SECRET}


async def test_every_route_needs_the_token(gateway: GatewayServer, store: Store) -> None:
    """Without the bearer token, or with a wrong one, every route but `/healthz` answers 401."""
    request = await _recorded(store, _request())
    routes = [
        ("GET", "/openapi.json", None),
        ("GET", _url(request), None),
        ("POST", _url(request), {"values": {"API_KEY": "a", "REGION": "b"}}),
    ]
    async with httpx.AsyncClient(timeout=60, base_url=gateway.url) as anonymous:
        for method, path, body in routes:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
                reply = await anonymous.request(method, path, json=body, headers=headers)
                assert reply.status_code == 401, (method, path, headers)
                assert reply.json()["error"] == "bearer token required"
                assert reply.headers["www-authenticate"].startswith("Bearer")
    still = await asyncio.to_thread(store.variable_requests.get, request.request_id)
    assert still is not None and still.status == "pending"
    async with httpx.AsyncClient(timeout=60, base_url=gateway.url) as anonymous:
        health = await anonymous.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok"


async def test_unknown_request_or_other_parent_is_404(
    http: httpx.AsyncClient, store: Store
) -> None:
    """A request id that does not exist, or that belongs to another parent, is 404 by name."""
    request = await _recorded(store, _request())
    unknown = VARIABLES_PATH.format(parent_thread_id=request.parent_thread_id, request_id="nope")
    other = _url(request, parent="someone-else")
    for path, named in ((unknown, ["'nope'"]), (other, ["'someone-else'", request.request_id])):
        got = await http.get(path)
        posted = await http.post(path, json={"values": {"API_KEY": "a", "REGION": "b"}})
        for reply in (got, posted):
            assert reply.status_code == 404, reply.text
            assert all(name in reply.json()["error"] for name in named), reply.text
    still = await asyncio.to_thread(store.variable_requests.get, request.request_id)
    assert still is not None and still.status == "pending"


@pytest.mark.parametrize(
    ("body", "status", "fields"),
    [
        ({"values": {"API_KEY": "a"}}, 422, ["values.REGION"]),
        ({"values": {"API_KEY": "a", "REGION": "b", "EXTRA": "c"}}, 422, ["values.EXTRA"]),
        ({"values": {"API_KEY": {"nested": 1}, "REGION": "b"}}, 422, ["values.API_KEY"]),
        ({"values": {"API_KEY": ["a"], "REGION": None}}, 422, ["values.API_KEY", "values.REGION"]),
        (
            {"values": {"API_KEY": "x" * (MAX_VALUE_BYTES + 1), "REGION": "b"}},
            422,
            ["values.API_KEY"],
        ),
        ({"values": "API_KEY=a"}, 422, ["values"]),
        ({}, 422, ["values"]),
        ({"values": {"API_KEY": "a", "REGION": "b"}, "extra": 1}, 422, ["extra"]),
    ],
)
async def test_bad_values_are_refused_by_field(
    http: httpx.AsyncClient, store: Store, body: dict[str, Any], status: int, fields: list[str]
) -> None:
    """Missing or unknown names, non-scalar or oversized values: 422 naming each field."""
    request = await _recorded(store, _request())
    reply = await http.post(_url(request), json=body)
    assert reply.status_code == status, reply.text
    assert reply.json()["fields"] == fields
    for field in fields:
        assert field in reply.json()["error"]
    with pytest.raises(NotProvided):
        await asyncio.to_thread(store.variable_requests.provided_values, request.request_id)


async def test_malformed_or_huge_bodies_are_refused(http: httpx.AsyncClient, store: Store) -> None:
    """Broken JSON is 400, a form body 415, one beyond the size cap 413; nothing is stored."""
    request = await _recorded(store, _request())
    headers = {"Content-Type": "application/json"}
    broken = await http.post(_url(request), content=b'{"values": {', headers=headers)
    assert broken.status_code == 400, broken.text
    assert broken.json()["fields"] == ["body"] and "not valid JSON" in broken.json()["error"]
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    as_form = await http.post(_url(request), content=b"API_KEY=a&REGION=b", headers=form)
    assert as_form.status_code == 415, as_form.text
    huge = json.dumps({"values": {"API_KEY": "x" * 2_000_000, "REGION": "b"}})
    too_big = await http.post(_url(request), content=huge, headers=headers)
    assert too_big.status_code == 413, too_big.text
    still = await asyncio.to_thread(store.variable_requests.get, request.request_id)
    assert still is not None and still.status == "pending"


async def test_scalars_are_accepted_and_kept_as_given(
    http: httpx.AsyncClient, temporal_client: Client, probe_queue: str, store: Store
) -> None:
    """Numbers and booleans are JSON scalars too: stored as given."""
    request = _request(None, "PORT", "DEBUG", "RATIO")
    handle = await temporal_client.start_workflow(
        SignalProbe.run, request, id=request.parent_thread_id, task_queue=probe_queue
    )
    await _until_recorded(store, request)
    values = {"PORT": 5432, "DEBUG": True, "RATIO": 0.25}
    posted = await http.post(_url(request), json={"values": values})
    assert posted.status_code == 202, posted.text
    await asyncio.wait_for(handle.result(), 30)
    assert (
        await asyncio.to_thread(store.variable_requests.provided_values, request.request_id)
        == values
    )


async def test_second_post_conflicts(
    http: httpx.AsyncClient, temporal_client: Client, probe_queue: str, store: Store
) -> None:
    """Values are provided once: a second POST is 409 and the first values stay."""
    request = _request()
    handle = await temporal_client.start_workflow(
        SignalProbe.run, request, id=request.parent_thread_id, task_queue=probe_queue
    )
    await _until_recorded(store, request)
    first = await http.post(_url(request), json={"values": {"API_KEY": SECRET, "REGION": "eu"}})
    assert first.status_code == 202, first.text
    second = await http.post(_url(request), json={"values": {"API_KEY": "other", "REGION": "us"}})
    assert second.status_code == 409, second.text
    assert request.request_id in second.json()["error"]
    await asyncio.wait_for(handle.result(), 30)
    values = await asyncio.to_thread(store.variable_requests.provided_values, request.request_id)
    assert values == {"API_KEY": SECRET, "REGION": "eu"}


async def test_parent_not_running_is_410_and_keeps_nothing(
    http: httpx.AsyncClient, store: Store
) -> None:
    """With no parent workflow to signal, POST is 410 and the request stays pending, valueless."""
    request = await _recorded(store, _request())
    reply = await http.post(_url(request), json={"values": {"API_KEY": SECRET, "REGION": "eu"}})
    assert reply.status_code == 410, reply.text
    assert request.parent_thread_id in reply.json()["error"]
    raw = await asyncio.to_thread(_raw_row, store, request.request_id)
    assert raw["status"] == "pending" and raw["values"] == {}


async def test_values_are_sealed_at_rest(
    http: httpx.AsyncClient,
    temporal_client: Client,
    probe_queue: str,
    store: Store,
    tmp_path: Path,
) -> None:
    """With keys configured, the values column is an envelope and no database file holds them."""
    request = _request()
    handle = await temporal_client.start_workflow(
        SignalProbe.run, request, id=request.parent_thread_id, task_queue=probe_queue
    )
    await _until_recorded(store, request)
    posted = await http.post(
        _url(request), json={"values": {"API_KEY": SECRET, "REGION": OTHER_SECRET}}
    )
    assert posted.status_code == 202, posted.text
    await asyncio.wait_for(handle.result(), 30)
    raw = await asyncio.to_thread(_raw_row, store, request.request_id)
    assert set(raw["values"]) == {"$weftEncrypted"}
    assert raw["values"]["$weftEncrypted"]["keyId"] == "k1"
    column = json.dumps(raw["values"]) + json.dumps(raw["data"])
    assert SECRET not in column and OTHER_SECRET not in column
    files = list(tmp_path.glob("weft.db*"))
    assert files
    for path in files:
        data = path.read_bytes()
        assert SECRET.encode() not in data and OTHER_SECRET.encode() not in data, path.name


async def test_thread_init_merges_scoped_values_as_secrets(store: Store, tmp_path: Path) -> None:
    """`thread.init` with `scoped_env_request` adds the values to the thread's env as secrets."""
    request = await _recorded(store, _request())
    await asyncio.to_thread(_provide, store, request, {"API_KEY": SECRET, "REGION": OTHER_SECRET})
    definitions = agent_definitions("unused", tools=[])
    records = ThreadRecordActivities(store, definitions, SnapshotCache(store))
    child = f"child-{uuid.uuid4().hex[:8]}"
    # thread.init reads its attempt (for its hooks' event ids): run it as an activity.
    await ActivityEnvironment().run(
        records.init_thread,
        ThreadInitInput(
            thread_id=child,
            agent="helper",
            parent_thread_id=request.parent_thread_id,
            env={"MODE": {"value": "fast", "type": "text"}},
            scoped_env_request=request.request_id,
        ),
    )
    row = await asyncio.to_thread(store.threads.get, child)
    assert row is not None
    assert row.env == {
        "MODE": {"value": "fast", "type": "text"},
        "API_KEY": {"value": SECRET, "type": "secret"},
        "REGION": {"value": OTHER_SECRET, "type": "secret"},
    }
    with store.engine.connect() as connection:
        sealed = connection.scalar(select(threads.c.env).where(threads.c.thread_id == child))
    assert SECRET not in json.dumps(sealed)


async def test_thread_init_refuses_a_request_without_values(store: Store) -> None:
    """A pending or unknown request fails `thread.init` for good, naming the request."""
    pending = await _recorded(store, _request())
    records = ThreadRecordActivities(
        store, agent_definitions("unused", tools=[]), SnapshotCache(store)
    )
    for request_id in (pending.request_id, "vr-does-not-exist"):
        child = f"child-{uuid.uuid4().hex[:8]}"
        with pytest.raises(ApplicationError) as caught:
            await records.init_thread(
                ThreadInitInput(thread_id=child, agent="helper", scoped_env_request=request_id)
            )
        assert caught.value.non_retryable
        assert request_id in str(caught.value)
        assert await asyncio.to_thread(store.threads.get, child) is None


async def test_recording_a_request_twice_keeps_the_first(store: Store) -> None:
    """`variable_requests.create` is idempotent by request id: a retry never changes or resets it."""
    request = _request()
    first = await _recorded(store, request)
    await asyncio.to_thread(_provide, store, request, {"API_KEY": "a", "REGION": "b"})
    again = await _recorded(store, request.model_copy(update={"missing": ["OTHER"]}))
    assert again.missing == first.missing == ["API_KEY", "REGION"]
    assert again.status == "provided"
    assert again.created_at == first.created_at


async def test_store_functions_on_postgresql(postgres_databases: Any, keyring: Keyring) -> None:
    """On PostgreSQL too: recorded once, provided once (sealed), then taken."""
    store = await asyncio.to_thread(Store.open, postgres_databases(), keyring=keyring)
    try:
        request = await _recorded(store, _request())
        await _recorded(store, request.model_copy(update={"missing": ["OTHER"]}))
        await asyncio.to_thread(_provide, store, request, {"API_KEY": SECRET, "REGION": "eu"})
        with pytest.raises(AlreadyProvided):
            await asyncio.to_thread(_provide, store, request, {"API_KEY": "x", "REGION": "y"})
        raw = await asyncio.to_thread(_raw_row, store, request.request_id)
        assert set(raw["values"]) == {"$weftEncrypted"} and SECRET not in json.dumps(
            raw, default=str
        )
        values = await asyncio.to_thread(
            store.variable_requests.provided_values, request.request_id
        )
        assert values == {"API_KEY": SECRET, "REGION": "eu"}
    finally:
        store.close()


async def test_openapi_describes_both_routes(http: httpx.AsyncClient) -> None:
    """The OpenAPI document lists GET and POST on the variables path, with their bodies."""
    reply = await http.get("/openapi.json")
    assert reply.status_code == 200
    document = reply.json()
    operations = document["paths"][VARIABLES_PATH]
    assert set(operations) >= {"get", "post"}
    got = operations["get"]["responses"]
    assert got["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/VariableRequest")
    assert "404" in got and "401" in got
    posted = operations["post"]
    assert posted["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ProvideValues"
    )
    assert {"202", "404", "409", "422"} <= set(posted["responses"])
    schemas = document["components"]["schemas"]
    assert {"VariableRequest", "ProvideValues", "ValuesAccepted", "ErrorBody"} <= set(schemas)
    assert "values" not in schemas["VariableRequest"]["properties"]
    assert "HTTPBearer" in document["components"]["securitySchemes"]
    assert "/healthz" in document["paths"]


async def test_healthz_and_tcp_nodelay(http: httpx.AsyncClient, gateway: GatewayServer) -> None:
    """`/healthz` reports the store and Temporal; the open connection has Nagle off."""
    reply = await http.get("/healthz")
    assert reply.status_code == 200, reply.text
    assert reply.json() == {"status": "ok", "store": True, "temporal": True}
    connections = list(gateway.server.server_state.connections)
    assert connections, "httpx keeps its connection open"
    for connection in connections:
        assert isinstance(connection, NoDelayH11Protocol)
        sock = connection.transport.get_extra_info("socket")
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


async def test_a_taken_port_is_a_clear_error(store: Store, temporal_client: Client) -> None:
    """A port already in use fails `async with GatewayServer` with the address, not an exit."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = GatewayServer(create_app(store, temporal_client, TOKEN), port=port)
        with pytest.raises(RuntimeError, match=f"127.0.0.1:{port}"):
            async with server:
                pass


async def test_weft_serve_command(tmp_path: Path, dev_server: DevServer, keyring: Keyring) -> None:
    """`weft serve` reads the config, serves with the token, and stops on SIGTERM."""
    port = free_port()
    environ = {
        **os.environ,
        "WEFT_TEMPORAL_ADDRESS": dev_server.address,
        "WEFT_STORE_URL": f"sqlite:///{tmp_path / 'serve.db'}",
        "WEFT_CODEC_KEYS": f"k9:{new_key()}",
        "WEFT_GATEWAY_TOKEN": TOKEN,
        "WEFT_CONFIG": str(tmp_path / "absent.yml"),
    }
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "serve",
        "--port",
        str(port),
        env=environ,
        cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        banner = (await asyncio.wait_for(process.stdout.readline(), 30)).decode()
        assert f"http://127.0.0.1:{port}" in banner and "keys k9" in banner
        async with httpx.AsyncClient(timeout=60, base_url=f"http://127.0.0.1:{port}") as client:
            refused = await client.get("/openapi.json")
            assert refused.status_code == 401
            ok = await client.get("/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200, ok.text
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 0, err.decode()


# -- helpers ------------------------------------------------------------------------------


async def _until_recorded(store: Store, request: VariableRequest) -> None:
    for _ in range(200):
        if await asyncio.to_thread(store.variable_requests.get, request.request_id) is not None:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{request.request_id} was never recorded")


def _provide(store: Store, request: VariableRequest, values: dict[str, Any]) -> None:
    store.variable_requests.provide(request.request_id, values)


def _raw_row(store: Store, request_id: str) -> dict[str, Any]:
    query = select(variable_requests).where(variable_requests.c.request_id == request_id)
    with store.engine.connect() as connection:
        row = connection.execute(query).mappings().one()
    return dict(row)
