"""Tenant quotas (docs/tenants.md#quotas), against a real `weft serve` app, a worker on the
scripted model and the session's dev server: a start over the tenant's active-thread quota
is 429 naming it (and `QuotaExceeded` from Python) while its running threads run on, and
succeeds once one of them closed; a tenant over its token budget gets 429 on a message,
and a running thread's model call gets `quota.blocked` with its message kept; the
`weft tenant quota` commands; migration 0018 on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from alembic import command
from api_support import ApiStack, api_stack
from sqlalchemy import create_engine, inspect, text
from support import add_script, agent_definitions, event_schema_validator, idle_after, wait_until
from temporalio.client import WorkflowExecutionStatus

from weft.cli.main import run as weft_cli
from weft.client.threads import Threads
from weft.contract.thread import SIGNAL_QUEUE_MESSAGE
from weft.store import Store
from weft.store.migrate import alembic_config, upgrade
from weft.store.tenant_quotas import QuotaExceeded
from weft.workers.config import WeftConfig

SCRIPT = {"turns": [{"replies": [{"text": "hi there"}]} for _ in range(4)]}
WRITE = ["threads:read", "threads:write"]


def _client(stack: ApiStack, tenant: str) -> httpx.AsyncClient:
    key = stack.store.api_keys.create(tenant, WRITE).secret
    return httpx.AsyncClient(
        timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
    )


async def _until(check: Callable[[], Awaitable[Any]], *, seconds: float = 20) -> Any:
    """Poll the async `check` until it returns something truthy (bounded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while loop.time() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError("condition not met")


async def _start(http: httpx.AsyncClient, **body: Any) -> httpx.Response:
    return await http.post("/threads", json={"agent": "helper", **body})


async def test_a_start_over_the_active_thread_quota_is_refused(
    start_worker, temporal_client, weft_config, scripted_server
):
    """At 2 of 2 active threads a start is 429 naming the quota and the count, over HTTP
    and from Python; the running threads run on; once one closes, a start succeeds."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        tenant = f"acme-{uuid.uuid4().hex[:6]}"
        stack.store.tenant_quotas.set(
            tenant, max_active_threads=2, max_tokens=None, max_cost_usd=None
        )
        async with _client(stack, tenant) as acme, _client(stack, "other") as other:
            first, second = [await _start(acme) for _ in range(2)]
            assert first.status_code == second.status_code == 201, first.text
            running = [first.json()["threadId"], second.json()["threadId"]]

            retry_key = {"Idempotency-Key": f"start-{uuid.uuid4().hex}"}
            refused = await acme.post("/threads", json={"agent": "helper"}, headers=retry_key)
            assert refused.status_code == 429, refused.text
            error = refused.json()["error"]
            assert "maxActiveThreads" in error and "2 of 2" in error and tenant in error
            threads = Threads(temporal_client, task_queue=worker.task_queue, store=stack.store)
            with pytest.raises(QuotaExceeded, match=r"maxActiveThreads \(active threads: 2 of 2\)"):
                await threads.start("helper", tenant=tenant)
            # Another tenant is not held by acme's quota.
            assert (await _start(other)).status_code == 201

            # The refusals touched nothing that runs, and started nothing.
            for thread_id in running:
                described = await temporal_client.get_workflow_handle(thread_id).describe()
                assert described.status == WorkflowExecutionStatus.RUNNING
            assert stack.store.tenant_quotas.active_threads(tenant) == 2
            assert len(stack.store.threads.list(limit=100)) == 3

            closed = await acme.post(f"/threads/{running[0]}/terminate", json={})
            assert closed.status_code in (200, 202), closed.text

            async def one_active() -> bool:
                return (
                    await asyncio.to_thread(stack.store.tenant_quotas.active_threads, tenant) == 1
                )

            await _until(one_active)
            # The refused request's key was not spent on the refusal: its retry starts.
            again = await acme.post("/threads", json={"agent": "helper"}, headers=retry_key)
            assert again.status_code == 201, again.text


async def test_a_tenant_over_its_token_budget_is_refused_and_blocked(
    start_worker, temporal_client, weft_config, scripted_server
):
    """A tenant with `maxTokens: 1`: its first turn runs and charges the tenant what the
    thread's ledger counts; then a message is 429 naming the quota, and a model call of a
    running thread (a message queued straight through Temporal) is refused with
    `quota.blocked`, its turn ended `budget_exhausted`, the message kept in the store."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        tenant = f"bud-{uuid.uuid4().hex[:6]}"
        quotas = stack.store.tenant_quotas
        quotas.set(tenant, max_active_threads=None, max_tokens=1, max_cost_usd=None)
        async with _client(stack, tenant) as http:
            started = await _start(http, messages=[{"role": "user", "content": "hello"}])
            assert started.status_code == 201, started.text
            thread_id = started.json()["threadId"]
            handle = temporal_client.get_workflow_handle(thread_id)
            await wait_until(handle, idle_after(1), timeout=20)

            quota = quotas.get(tenant)
            assert quota is not None and quota.tokens > 1
            ledger = stack.store.budgets.get(thread_id, now=quota.updated_at)
            assert ledger is not None and ledger.spent.tokens == quota.tokens

            refused = await http.post(f"/threads/{thread_id}/messages", json={"content": "more"})
            assert refused.status_code == 429, refused.text
            assert "maxTokens" in refused.json()["error"]
            assert f"{quota.tokens:g} of 1" in refused.json()["error"]
            refused = await http.post(f"/threads/{thread_id}/turns", json={"content": "more"})
            assert refused.status_code == 429, refused.text
            assert (await _start(http)).status_code == 429

            # A running thread's model call while the tenant is over: blocked, not lost.
            await handle.signal(SIGNAL_QUEUE_MESSAGE, {"role": "user", "content": "kept one"})
            state = await wait_until(handle, idle_after(2), timeout=20)
            assert state.stop_reason == "budget_exhausted", state
            assert "maxTokens" in (state.last_outcome or "")
            blocked = stack.store.events.read(thread_id, types=["quota.blocked"])
            assert len(blocked) == 1
            assert blocked[0].payload is not None
            assert blocked[0].payload["tenant"] == tenant
            assert blocked[0].payload["limit"] == "tokens"
            event_schema_validator().validate(blocked[0].to_wire())
            contents = [m.content for m in stack.store.messages.list(thread_id)]
            assert "kept one" in contents
            # No model was asked: the tenant's spend did not move.
            after = quotas.get(tenant)
            assert after is not None and after.tokens == quota.tokens


def _config_file(weft_config: WeftConfig, tmp_path: Path) -> str:
    path = tmp_path / "weft.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": weft_config.temporal.address},
                "store": {"url": weft_config.store_url()},
            }
        )
    )
    return str(path)


def test_the_quota_commands(
    weft_config: WeftConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_file(weft_config, tmp_path)

    def cli(*args: str) -> int:
        return weft_cli(["--config", config, "tenant", "quota", *args])

    assert cli("set", "acme", "--max-active-threads", "10", "--max-tokens", "1000000") == 0
    out = capsys.readouterr().out
    assert "active threads: 0 of 10" in out and "tokens:         0 of 1e+06" in out
    # A flag not given keeps its value; `none` removes a limit.
    assert cli("set", "acme", "--max-cost-usd", "2.5", "--max-tokens", "none") == 0
    capsys.readouterr()
    with Store.open(weft_config.store_url()) as store:
        quota = store.tenant_quotas.get("acme")
    assert quota is not None
    assert (quota.max_active_threads, quota.max_tokens, quota.max_cost_usd) == (10, None, 2.5)
    assert cli("show", "acme", "--json") == 0
    assert '"maxActiveThreads": 10' in capsys.readouterr().out

    # Bad input names what is wrong.
    with pytest.raises(SystemExit):
        cli("set", "acme", "--max-active-threads", "0")
    assert "--max-active-threads: '0': must be greater than 0" in capsys.readouterr().err
    assert cli("set", "acme") == 1
    assert "give --max-active-threads" in capsys.readouterr().err
    assert cli("set", "a b", "--max-tokens", "5") == 1
    assert "weft: tenant 'a b'" in capsys.readouterr().err

    assert cli("clear", "acme") == 0
    assert "quota cleared" in capsys.readouterr().out
    assert cli("show", "acme") == 0
    assert "no quota" in capsys.readouterr().out


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migration_adds_tenant_quotas_and_goes_back(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'old.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_databases")()
    )
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    config = alembic_config()
    try:
        upgrade(engine, "0017")
        assert "tenant_quotas" not in inspect(engine).get_table_names()
        with engine.begin() as connection:  # a task from before tenants
            connection.execute(
                text(
                    "INSERT INTO tasks (task_id, status, assignee, data, created_at, updated_at)"
                    " VALUES ('task-old', 'queued', 'helper', '{}', :at, :at)"
                ),
                {"at": datetime.now(UTC)},
            )
        upgrade(engine)
        with engine.connect() as connection:
            tenant = connection.execute(text("SELECT tenant FROM tasks")).scalar_one()
        assert tenant == "default"
        for table in ("tasks", "jobs"):
            names = {i["name"] for i in inspect(engine).get_indexes(table)}
            assert f"ix_{table}_tenant_updated" in names
        with Store(engine) as store:
            store.tenant_quotas.set("acme", max_active_threads=3, max_tokens=10, max_cost_usd=None)
            quota = store.tenant_quotas.get("acme")
            assert quota is not None and quota.max_tokens == 10 and quota.tokens == 0
            store.tenant_quotas.check_start("acme")  # 0 of 3 active: allowed
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0017")
        assert "tenant_quotas" not in inspect(engine).get_table_names()
        assert "tenant" not in {c["name"] for c in inspect(engine).get_columns("tasks")}
        assert "tenant" not in {c["name"] for c in inspect(engine).get_columns("jobs")}
    finally:
        engine.dispose()
