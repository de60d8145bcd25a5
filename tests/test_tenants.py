"""Tenants over HTTP: API keys with scopes, and each tenant's threads hidden from the others.

Two tenants' keys against a real `weft serve` app (uvicorn on loopback, a worker on the
scripted model, the session's dev server): one never sees, lists or steers the other's
threads (404, worded as for an unknown thread), a missing scope is 403 naming it, a
revoked or expired key is 401 at its next request. Then the `weft key` commands, a
subagent inheriting its parent's tenant, and migration 0015 on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from alembic.script import ScriptDirectory
from api_support import SSE, ApiStack, api_stack
from sqlalchemy import create_engine, inspect, text
from subagent_support import family
from support import add_script, agent_definitions

from weft.api import create_api
from weft.api.auth import ROUTE_SCOPES, TENANT_ATTRIBUTE
from weft.api.context import ApiContext
from weft.api.event_feed import open_event_feed
from weft.api.idempotency import IDEMPOTENCY_HEADER, REPLAYED_HEADER
from weft.cli.main import run as weft_cli
from weft.client.threads import Threads
from weft.store import Store
from weft.store.api_keys import ApiKey
from weft.store.audit import AuditEntry
from weft.store.migrate import alembic_config, upgrade

SCRIPT = {"turns": [{"replies": [{"text": "hi there"}]}]}
WRITE = ["threads:read", "threads:write", "actions:respond"]


def _key(stack: ApiStack, tenant: str, scopes: list[str], **fields: Any) -> str:
    return stack.store.api_keys.create(tenant, scopes, **fields).secret


def _client(stack: ApiStack, key: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
    )


async def _until(check: Callable[[], Any], *, seconds: float = 20) -> Any:
    """Poll the async `check` until it returns something truthy (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met")


async def _start(http: httpx.AsyncClient, **headers: str) -> str:
    reply = await http.post("/threads", json={"agent": "helper"}, headers=headers)
    assert reply.status_code == 201, reply.text
    thread_id: str = reply.json()["threadId"]
    return thread_id


async def _listing(http: httpx.AsyncClient) -> list[str]:
    """Every thread the key lists, one per page, following the page tokens."""
    found: list[str] = []
    token: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1, **({"pageToken": token} if token else {})}
        reply = await http.get("/threads", params=params)
        assert reply.status_code == 200, reply.text
        page = reply.json()
        found += [thread["threadId"] for thread in page["threads"]]
        token = page["nextPageToken"]
        if not token:
            return found


# Every route that names a thread, with what a request to it needs.
def _thread_routes(thread_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    base = f"/threads/{thread_id}"
    return [
        ("GET", base, None),
        ("GET", f"{base}/session", None),
        ("GET", f"{base}/messages/m1", None),
        ("GET", f"{base}/files/notes.txt", None),
        ("GET", f"{base}/tools", None),
        ("GET", f"{base}/environment", None),
        ("GET", f"{base}/events", None),
        ("POST", f"{base}/messages", {"content": "hello"}),
        ("POST", f"{base}/turns", {"content": "hello"}),
        ("POST", f"{base}/actions/act_1", {"decision": "approve"}),
        ("POST", f"{base}/budget", {"maxCostUsd": 1}),
        ("POST", f"{base}/queue/q1/remove", None),
        ("POST", f"{base}/queue/q1/promote", None),
        ("POST", f"{base}/tools/refresh", None),
        ("POST", f"{base}/interrupt", None),
        ("POST", f"{base}/upgrade", None),
        ("POST", f"{base}/terminate", None),
        ("GET", f"{base}/variables/req_1", None),
        ("POST", f"{base}/variables/req_1", {"values": {"X": "1"}}),
    ]


async def test_tenants_see_and_steer_only_their_own_threads(
    start_worker, temporal_client, weft_config, scripted_server, tmp_path
):
    """acme and globex keys on one server: each reaches only its tenant's threads (404 as
    for an unknown thread on every thread route, lists and page tokens its own only), a
    read-only key may not steer (403), every control action is audited, idempotency keys
    do not cross tenants, a revoked or expired key is refused at its next request."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        acme_key, globex_key = _key(stack, "acme", WRITE), _key(stack, "globex", WRITE)
        reader_key = _key(stack, "acme", ["threads:read"])
        async with (
            _client(stack, acme_key) as acme,
            _client(stack, globex_key) as globex,
            _client(stack, reader_key) as reader,
        ):
            ours, theirs = await _start(acme), await _start(globex)
            admins = await _start(stack.http)  # the server's token: `default`'s thread

            # Each thread belongs to the tenant that started it, in the store and in
            # Temporal's visibility; the token's thread to `default`.
            store = stack.store
            tenants = [store.threads.tenant(t) for t in (ours, theirs, admins)]
            assert tenants == ["acme", "globex", "default"]
            described = await temporal_client.get_workflow_handle(ours).describe()
            assert described.typed_search_attributes.get(TENANT_ATTRIBUTE) == "acme"

            # Another tenant's thread answers exactly as an unknown one, on every route.
            unknown = f"helper-{uuid.uuid4().hex[:12]}"
            for method, path, body in _thread_routes(ours):
                foreign = await globex.request(method, path, json=body)
                missing = await globex.request(method, path.replace(ours, unknown), json=body)
                assert foreign.status_code == missing.status_code == 404, (path, foreign.text)
                assert foreign.json() == {"error": f"no thread {ours!r}", "fields": []}
                assert missing.json() == {"error": f"no thread {unknown!r}", "fields": []}
            async with globex.stream("GET", f"/threads/{ours}/events", headers=SSE) as stream:
                assert stream.status_code == 404

            # The owner reads and steers its thread; the server's token still reaches all.
            read = (await acme.get(f"/threads/{ours}")).json()
            assert read["threadId"] == ours
            sent = await acme.post(f"/threads/{ours}/messages", json={"content": "hello"})
            assert sent.status_code == 202, sent.text
            page = await acme.get(f"/threads/{ours}/events", params={"wait": 5})
            assert page.status_code == 200 and page.json()["events"], page.text
            assert (await stack.http.get(f"/threads/{theirs}")).status_code == 200

            # Listings: each tenant its own threads only, page by page; the token all.
            await _until(lambda: _has(stack.http, {ours, theirs, admins}))
            assert await _listing(acme) == [ours]
            assert await _listing(globex) == [theirs]
            # A page token is bound to its filters, the tenant's included: the token's
            # next page (of all three threads) is no page of a tenant's.
            first = (await stack.http.get("/threads", params={"limit": 1})).json()
            assert first["nextPageToken"]
            crossed = await acme.get(
                "/threads", params={"limit": 1, "pageToken": first["nextPageToken"]}
            )
            assert crossed.status_code == 422 and crossed.json()["fields"] == ["pageToken"]

            # A key without threads:write reads, but may not steer (403 naming the scope).
            assert (await reader.get(f"/threads/{ours}")).status_code == 200
            refused = await reader.post(f"/threads/{ours}/messages", json={"content": "x"})
            assert refused.status_code == 403
            assert "'threads:write'" in refused.json()["error"]
            # Routes that are no tenant's (the cluster's deployments) stay with the operator.
            deployment = await acme.get("/deployments/weft")
            assert deployment.status_code == 403 and "'admin'" in deployment.json()["error"]

            # A fork (the operator's) belongs to its source's tenant.
            def turn_ended() -> str | None:
                ends = [e for e in store.events.read(ours) if e.type == "turn.completed"]
                return ends[0].turn_id if ends else None

            turn_id = await _until(lambda: asyncio.to_thread(turn_ended))
            fork = await stack.http.post(f"/threads/{ours}/fork", json={"at": turn_id})
            assert fork.status_code == 201, fork.text
            fork_id = fork.json()["threadId"]
            assert store.threads.tenant(fork_id) == "acme"
            described = await temporal_client.get_workflow_handle(fork_id).describe()
            assert described.typed_search_attributes.get(TENANT_ATTRIBUTE) == "acme"
            assert (await acme.get(f"/threads/{fork_id}")).status_code == 200
            assert (await globex.get(f"/threads/{fork_id}")).status_code == 404

            # The same Idempotency-Key from two tenants: two requests, no replay across.
            key = {IDEMPOTENCY_HEADER: f"k-{uuid.uuid4().hex}"}
            first_start = await acme.post("/threads", json={"agent": "helper"}, headers=key)
            second_start = await globex.post("/threads", json={"agent": "helper"}, headers=key)
            assert first_start.status_code == second_start.status_code == 201
            assert REPLAYED_HEADER not in second_start.headers
            assert first_start.json()["threadId"] != second_start.json()["threadId"]
            again = await acme.post("/threads", json={"agent": "helper"}, headers=key)
            assert again.headers.get(REPLAYED_HEADER) == "true"
            assert again.json()["threadId"] == first_start.json()["threadId"]

            # Every control action is in the audit log, with who sent it and its outcome
            # (refusals too), written before its reply.
            done = [
                (e.subject, e.tenant, e.route, e.status) for e in store.audit.list(thread_id=ours)
            ]
            acme_id, globex_id = acme_key.split(".")[1], globex_key.split(".")[1]
            reader_id = reader_key.split(".")[1]
            messages = "/threads/{thread_id}/messages"
            assert (acme_id, "acme", messages, 202) in done
            assert (globex_id, "globex", messages, 404) in done
            assert (reader_id, "acme", messages, 403) in done
            started = store.audit.list(subject="token")
            # The operator's fork names the tenant of the thread it forked.
            assert [(e.route, e.tenant, e.status) for e in started] == [
                ("/threads", None, 201),
                ("/threads/{thread_id}/fork", "acme", 201),
            ]

            # The inbox page takes a key as it takes the token (into its cookie), and then
            # reads through the same routes: its tenant's threads only.
            async with httpx.AsyncClient(timeout=60, base_url=stack.url) as browser:
                opened = await browser.get("/inbox", params={"token": acme_key})
                assert opened.status_code == 303
                assert (await browser.get(f"/threads/{ours}")).status_code == 200
                assert (await browser.get(f"/threads/{theirs}")).status_code == 404
                inbox = await browser.get("/threads", params={"awaiting": "any"})
                assert inbox.status_code == 200
                assert {t["threadId"] for t in inbox.json()["threads"]} <= {ours}

            # A revoked key is refused at its very next request.
            key_id = acme_key.split(".")[1]
            await asyncio.to_thread(store.api_keys.revoke, key_id)
            revoked = await acme.get(f"/threads/{ours}")
            assert revoked.status_code == 401
            assert revoked.json()["error"] == f"API key {key_id} is revoked"

        # An expired key is refused; an unknown one as any wrong token.
        long_ago = datetime.now(UTC) - timedelta(hours=2)
        expired_key = _key(
            stack, "acme", WRITE, now=long_ago, expires_at=long_ago + timedelta(hours=1)
        )
        async with _client(stack, expired_key) as expired:
            reply = await expired.get("/threads")
            assert reply.status_code == 401 and "expired" in reply.json()["error"]
        forged = f"weft.{expired_key.split('.')[1]}.not-the-secret"
        async with _client(stack, forged) as wrong:
            reply = await wrong.get("/threads")
            assert reply.status_code == 401
            assert reply.json()["error"] == "bearer token required"

        # The CLI starts a thread for a tenant (as the operator), and refuses a bad name.
        config = tmp_path / "cli.yml"
        temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
        config.write_text(
            yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
        )
        code, out, err = await _weft(config, "thread", "start", "helper", "--tenant", "acme")
        assert code == 0, err
        assert stack.store.threads.tenant(out.strip()) == "acme"
        code, _, err = await _weft(config, "thread", "start", "helper", "--tenant", "a b")
        assert code == 1 and "Traceback" not in err, err
        assert err.startswith("weft: field 'tenant'") and "tenant 'a b': 1 to 64" in err


async def _weft(config: Path, *args: str) -> tuple[int, str, str]:
    """Run the `weft` command; its exit code, stdout and stderr."""
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    return process.returncode or 0, out.decode(), err.decode()


async def _has(http: httpx.AsyncClient, thread_ids: set[str]) -> bool:
    reply = await http.get("/threads", params={"limit": 100})
    return thread_ids <= {thread["threadId"] for thread in reply.json()["threads"]}


async def test_a_subagent_belongs_to_its_parents_tenant(
    start_worker, temporal_client, weft_config, scripted_server
):
    """A thread started through the Python client names its tenant; its subagent inherits
    it, in the store and as its search attribute, and only that tenant's key reaches it."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "Rome?"}}]},
                {"text": "Rome is warm."},
            ]
        },
    )
    child = add_script(
        scripted_server,
        {"replies": [{"tool_calls": [{"name": "report", "arguments": {"summary": "21 C"}}]}]},
    )
    worker = await start_worker(family(parent, child))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        threads = Threads(temporal_client, task_queue=worker.task_queue)
        handle = await threads.start("boss", messages=["go"], tenant="acme")

        def child_row() -> str | None:
            rows = stack.store.threads.list(limit=100)
            return next((r.thread_id for r in rows if r.parent_thread_id == handle.id), None)

        async def child_started() -> str | None:
            return await asyncio.to_thread(child_row)

        child_id = await _until(child_started)
        assert stack.store.threads.tenant(handle.id) == "acme"
        assert stack.store.threads.tenant(child_id) == "acme"
        described = await temporal_client.get_workflow_handle(child_id).describe()
        assert described.typed_search_attributes.get(TENANT_ATTRIBUTE) == "acme"
        async with (
            _client(stack, _key(stack, "acme", ["threads:read"])) as acme,
            _client(stack, _key(stack, "globex", ["threads:read"])) as globex,
        ):
            assert (await acme.get(f"/threads/{child_id}/session")).status_code == 200
            assert (await globex.get(f"/threads/{child_id}/session")).status_code == 404


async def test_a_thread_id_cannot_join_another_tenants_thread_or_a_task_log(
    start_worker, temporal_client, weft_config, scripted_server
):
    """A closed thread's id may be started again by its own tenant only, and no thread
    may start under a task's id (a task's log is kept under it): either is refused at
    start with the same words, which do not say whose the id is."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        acme_key, globex_key = _key(stack, "acme", WRITE), _key(stack, "globex", WRITE)
        async with _client(stack, acme_key) as acme, _client(stack, globex_key) as globex:
            theirs = await _start(globex)
            closed = await globex.post(f"/threads/{theirs}/terminate", json={})
            assert closed.status_code == 202, closed.text
            await temporal_client.get_workflow_handle(theirs).result()

            # A tenant's key is refused before the worker (docs/tenants.md: its words do not
            # depend on who holds the id); the server's token reaches the worker's refusal.
            taken = await acme.post("/threads", json={"agent": "helper", "threadId": theirs})
            assert taken.status_code == 422, taken.text
            assert f"thread id {theirs!r} is not available to tenant 'acme'" in taken.text
            taken = await stack.http.post("/threads", json={"agent": "helper", "threadId": theirs})
            assert taken.status_code == 422, taken.text
            assert f"thread id {theirs!r} is taken" in taken.text
            assert stack.store.threads.tenant(theirs) == "globex"

            task_id = f"task-{uuid.uuid4().hex[:12]}"
            made = await stack.http.post(
                "/tasks",
                json={
                    "objective": "x",
                    "assignee": "helper",
                    "taskId": task_id,
                    "autoStart": False,
                },
            )
            assert made.status_code == 201, made.text
            cancelled = await stack.http.post(f"/tasks/{task_id}/cancel", json={})
            assert cancelled.status_code in (200, 202), cancelled.text
            await temporal_client.get_workflow_handle(task_id).result()  # its log stays
            log = await stack.http.post("/threads", json={"agent": "helper", "threadId": task_id})
            assert log.status_code == 422 and f"thread id {task_id!r} is taken" in log.text
            assert stack.store.threads.get(task_id) is None

            again = await globex.post("/threads", json={"agent": "helper", "threadId": theirs})
            assert again.status_code == 201, again.text  # its own tenant may reopen it


def test_an_unknown_tenant_name_is_refused_at_start():
    """A tenant name that could not be stored or searched is refused, naming the field."""
    from pydantic import ValidationError

    from weft.contract.thread import ThreadStartInput

    with pytest.raises(ValidationError, match="tenant"):
        ThreadStartInput.model_validate({"agent": "helper", "tenant": "acme' OR 1=1"})


async def test_every_scoped_route_is_served(temporal_client, weft_config):
    """The scope table names only routes `weft serve` has (a renamed route would otherwise
    fall back to admin unnoticed)."""
    store = Store.open(weft_config.store_url())
    feed = await open_event_feed(store)
    try:
        ctx = ApiContext(
            store=store,
            client=temporal_client,
            threads=Threads(temporal_client, task_queue="scopes", store=store),
            feed=feed,
            task_queue="scopes",
        )
        routes = _paths(create_api(ctx, "token").routes)
    finally:
        await feed.close()
        store.close()
    assert sorted(set(ROUTE_SCOPES) - routes) == []


def _paths(routes: Any, prefix: str = "") -> set[tuple[str, str]]:
    """(method, path template) of every route, as `authorize` sees it, into included
    routers (`served` in test_api_routes_doc.py, without unnaming the parameters)."""
    found: set[tuple[str, str]] = set()
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            found |= _paths(included.routes, prefix + route.include_context.prefix)
            continue
        found |= {(method, prefix + route.path) for method in getattr(route, "methods", ())}
    return found


# -- the CLI -----------------------------------------------------------------------------


def test_key_commands_create_list_and_revoke(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`weft key create` prints the key once (its scopes checked, each unknown one named),
    `list` never shows a secret, `revoke` refuses the key from then on."""
    store_url = f"sqlite:///{tmp_path / 'weft.db'}"
    config = tmp_path / "weft.yml"
    config.write_text(
        yaml.safe_dump({"store": {"url": store_url}, "temporal": {"address": "127.0.0.1:1"}})
    )

    def weft(*args: str) -> tuple[int, str, str]:
        code = weft_cli(["--config", str(config), *args])
        out = capsys.readouterr()
        return code, out.out, out.err

    code, out, err = weft(
        "key", "create", "--tenant", "acme", "--scopes", "threads:read,threads:writ"
    )
    assert code == 2 and "scope 'threads:writ' is unknown" in err
    code, out, err = weft("key", "create", "--tenant", "no such", "--scopes", "threads:read")
    assert code == 2 and "tenant 'no such'" in err
    code, out, err = weft(
        "key", "create", "--tenant", "acme", "--scopes", "threads:read", "--expires-in", "1w"
    )
    assert code == 2 and "--expires-in '1w'" in err

    code, out, _ = weft(
        "key", "create", "--tenant", "acme", "--scopes", "threads:read,threads:write", "--json"
    )
    assert code == 0
    created = json.loads(out)
    secret = created["key"]
    assert created["tenant"] == "acme" and created["scopes"] == ["threads:read", "threads:write"]
    code, out, _ = weft(
        "key", "create", "--tenant", "globex", "--scopes", "admin", "--expires-in", "30d"
    )
    assert code == 0 and "expires" in out
    globex_id = out.split()[1]

    # Listed without the secret; the store keeps only its hash.
    code, out, _ = weft("key", "list")
    assert code == 0 and created["keyId"] in out and globex_id in out
    assert secret not in out and secret.split(".")[2] not in out
    code, out, _ = weft("key", "list", "--tenant", "acme", "--json")
    [listed] = json.loads(out)
    assert listed["keyId"] == created["keyId"] and listed["state"] == "active"
    assert "key" not in listed
    with Store.open(store_url) as store:
        with store.engine.connect() as connection:
            stored = connection.execute(text("SELECT * FROM api_keys")).mappings().all()
        assert not any(secret.split(".")[2] in json.dumps(dict(r), default=str) for r in stored)
        found = store.api_keys.authenticate(secret)
        assert isinstance(found, ApiKey) and found.tenant == "acme"

    # `weft audit` shows who did what (here one action, recorded as `weft serve` does).
    with Store.open(store_url) as store:
        store.audit.record(
            AuditEntry(
                at=datetime.now(UTC),
                subject=created["keyId"],
                tenant="acme",
                method="POST",
                route="/threads/{thread_id}/terminate",
                path="/threads/t1/terminate",
                thread_id="t1",
                status=202,
            )
        )
    code, out, _ = weft("audit", "--thread", "t1", "--json")
    [action] = json.loads(out)
    assert (action["subject"], action["threadId"], action["status"]) == (
        created["keyId"],
        "t1",
        202,
    )
    code, out, _ = weft("audit", "--thread", "t2")
    assert code == 0 and out.strip() == "no control actions recorded"

    code, out, _ = weft("key", "revoke", created["keyId"])
    assert code == 0 and "revoked" in out
    code, out, _ = weft("key", "list", "--tenant", "acme", "--json")
    assert json.loads(out)[0]["state"] == "revoked"
    code, _, err = weft("key", "revoke", "k0000000000000000")
    assert code == 1 and "no key 'k0000000000000000'" in err


# -- migration 0015 ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migration_gives_existing_threads_the_default_tenant(
    backend: str, tmp_path: Path, postgres_databases: Callable[[], str]
) -> None:
    previous = ScriptDirectory.from_config(alembic_config()).get_revision("0015").down_revision
    assert isinstance(previous, str)
    url = f"sqlite:///{tmp_path / 'old.db'}" if backend == "sqlite" else postgres_databases()
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        upgrade(engine, previous)
        assert "api_keys" not in inspect(engine).get_table_names()
        now = datetime.now(UTC)
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO threads (thread_id, agent, status, created_at, updated_at, "
                    "env, usage, queue_depth) VALUES ('old', 'helper', 'completed', :now, "
                    ":now, '{}', '{}', 0)"
                ),
                {"now": now},
            )
        upgrade(engine)
        with Store(engine) as store:
            assert store.threads.tenant("old") == "default"
            created = store.api_keys.create("acme", ["threads:read"])
            found = store.api_keys.authenticate(created.secret)
            assert isinstance(found, ApiKey) and found.tenant == "acme"
    finally:
        engine.dispose()
