"""Retention: a closed thread past its TTL is deleted by a sweep (with its children), one
within its TTL and a running one are kept; the shorter of the agent's and the tenant's TTL
applies; a bad TTL is refused naming the file and field (or the flag); the
`weft-retention` schedule is enabled, reported and disabled on the real dev server; and
migration 0017 on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from alembic import command
from sqlalchemy import create_engine, insert, inspect
from support import StartWorker, add_script, agent_definitions, start_thread
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError, RPCStatusCode

from weft.cli.main import run as weft_cli
from weft.client.retention import Retention
from weft.contract.retention import RETENTION_WORKFLOW_TYPE, SweepCursor, shorter
from weft.contract.thread import SIGNAL_TERMINATE
from weft.definitions import DefinitionError, define_agent, load_directory
from weft.store import Store
from weft.store.migrate import alembic_config, upgrade
from weft.store.tables import threads
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

DAY = timedelta(days=1)


def _row(
    store: Store,
    thread_id: str,
    *,
    agent: str,
    closed_at: datetime,
    status: str = "completed",
    tenant: str = "default",
    parent: str | None = None,
) -> None:
    """A thread's row as its last flush leaves it."""
    with store.database.write() as connection:
        connection.execute(
            insert(threads).values(
                thread_id=thread_id,
                agent=agent,
                status=status,
                parent_thread_id=parent,
                created_at=closed_at - timedelta(minutes=5),
                updated_at=closed_at,
                env={},
                usage={},
                tenant=tenant,
            )
        )


# -- the policy -------------------------------------------------------------------------


def test_a_bad_agent_ttl_is_refused_naming_file_and_field(tmp_path: Path) -> None:
    root = tmp_path / "defs"
    (root / "agents").mkdir(parents=True)
    agent = root / "agents" / "a.yaml"
    agent.write_text("sideA:\n  prompt: p\nretention:\n  closedThreadsTtl: 30 days\n")
    with pytest.raises(DefinitionError) as refused:
        load_directory(root)
    assert "agents/a.yaml" in str(refused.value)
    assert "retention.closedThreadsTtl" in str(refused.value)
    assert "'30 days'" in str(refused.value)
    agent.write_text("sideA:\n  prompt: p\nretention:\n  closedThreadsTtl: 0s\n")
    with pytest.raises(DefinitionError, match="between 1s and 3650d"):
        load_directory(root)
    agent.write_text("sideA:\n  prompt: p\nretention:\n  closedThreadsTtl: 1d12h\n")
    loaded = load_directory(root).agents["a"].retention
    assert loaded is not None and loaded.ttl() == timedelta(hours=36)


def test_an_agent_without_retention_serializes_as_before() -> None:
    """Unset, the field is left out, so snapshot ids and digests do not move."""
    plain = define_agent(name="a", sideA={"prompt": "p"})
    assert "retention" not in plain.model_dump(mode="json")
    kept = define_agent(name="a", sideA={"prompt": "p"}, retention={"closedThreadsTtl": "30d"})
    assert kept.model_dump(mode="json")["retention"] == {"closedThreadsTtl": "30d"}


def test_the_shorter_of_agent_and_tenant_ttl_applies(tmp_path: Path) -> None:
    assert shorter(DAY, 3 * DAY) == DAY and shorter(None, 3 * DAY) == 3 * DAY
    assert shorter(DAY, None) == DAY and shorter(None, None) is None
    now = datetime(2026, 11, 27, 12, tzinfo=UTC)
    with Store.open(f"sqlite:///{tmp_path / 'store.db'}") as store:
        assert store.retention.set_tenant("acme", "3d") == 3 * DAY
        with pytest.raises(ValueError, match="--ttl 'soon'"):
            store.retention.set_tenant("acme", "soon")
        _row(store, "a-short", agent="short", closed_at=now - 2 * DAY)  # agent's 1d
        _row(store, "b-acme", agent="long", closed_at=now - 4 * DAY, tenant="acme")  # 3d < 30d
        _row(store, "c-long", agent="long", closed_at=now - 4 * DAY)  # 30d: kept
        _row(store, "d-none", agent="none", closed_at=now - 2 * DAY, tenant="acme")  # 3d: kept
        _row(store, "e-running", agent="short", closed_at=now - 9 * DAY, status="waiting_input")
        _row(store, "f-child", agent="short", closed_at=now - 9 * DAY, parent="a-short")
        _row(store, "g-orphan", agent="short", closed_at=now - 3 * DAY, parent="gone-parent")
        agents = {"short": DAY, "long": 30 * DAY}

        found = store.retention.expired(now, agents)
        assert [(t.thread_id, t.ttl_seconds) for t in found] == [
            ("b-acme", (3 * DAY).total_seconds()),
            ("g-orphan", DAY.total_seconds()),
            ("a-short", DAY.total_seconds()),
        ]
        # Batches in close order from a cursor.
        first = store.retention.expired(now, agents, limit=2)
        cursor = SweepCursor(closed_at=first[-1].closed_at, thread_id=first[-1].thread_id)
        rest = store.retention.expired(now, agents, cursor=cursor, limit=2)
        assert [t.thread_id for t in first + rest] == [t.thread_id for t in found]
        # Without the tenant's TTL, the agent's 30d keeps b-acme.
        assert store.retention.clear_tenant("acme") is True
        assert store.retention.clear_tenant("acme") is False
        assert [t.thread_id for t in store.retention.expired(now, agents)] == [
            "g-orphan",
            "a-short",
        ]
        assert store.retention.expired(now, {}) == []


def test_the_cli_refuses_a_bad_ttl_naming_the_flag(
    weft_config: WeftConfig, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_file(weft_config, tmp_path)
    code = weft_cli(["--config", config, "retention", "set", "--tenant", "acme", "--ttl", "90"])
    assert code == 1
    assert capsys.readouterr().err.startswith("weft: --ttl '90': use a number and a unit")
    code = weft_cli(["--config", config, "retention", "enable", "--every", "hourly"])
    assert code == 1 and "weft: --every 'hourly'" in capsys.readouterr().err
    code = weft_cli(["--config", config, "retention", "set", "--tenant", "a b", "--ttl", "9d"])
    assert code == 1 and "weft: tenant 'a b'" in capsys.readouterr().err
    assert (
        weft_cli(["--config", config, "retention", "set", "--tenant", "acme", "--ttl", "90d"]) == 0
    )
    assert "kept 90d after closing" in capsys.readouterr().out
    with Store.open(weft_config.store_url()) as store:
        assert store.retention.tenants() == {"acme": "90d"}


# -- the sweep --------------------------------------------------------------------------


async def _closed(client: Client, thread_id: str) -> None:
    """Terminate the thread and wait for its workflow (and so its row) to close."""
    handle = client.get_workflow_handle(thread_id)
    await handle.signal(SIGNAL_TERMINATE, {"reason": "done"})
    await asyncio.wait_for(handle.result(), timeout=30)


async def _forgotten(client: Client, thread_id: str) -> bool:
    try:
        await client.get_workflow_handle(thread_id).describe()
    except RPCError as err:
        return err.status == RPCStatusCode.NOT_FOUND
    return False


async def test_a_sweep_deletes_expired_threads_and_keeps_the_rest(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    definitions = agent_definitions(script, retention={"closedThreadsTtl": "1d"}).add(
        define_agent(
            name="keeper", sideA={"prompt": "helper_prompt"}, retention={"closedThreadsTtl": "30d"}
        )
    )
    worker = await start_worker(definitions)
    store = worker.store
    assert store is not None
    doomed = await start_thread(temporal_client, worker.task_queue)
    kept = await start_thread(temporal_client, worker.task_queue, agent="keeper")
    running = await start_thread(temporal_client, worker.task_queue)
    await asyncio.gather(_closed(temporal_client, doomed.id), _closed(temporal_client, kept.id))
    # A child whose workflow is long gone: it goes with its parent.
    closed_at = store.threads.get(doomed.id)
    assert closed_at is not None and closed_at.updated_at is not None
    child = f"child-{uuid.uuid4().hex[:8]}"
    _row(store, child, agent="helper", closed_at=closed_at.updated_at, parent=doomed.id)

    retention = Retention(temporal_client, store, task_queue=worker.task_queue)
    # Two days on: past helper's 1d, within keeper's 30d.
    result = await retention.run_now(now=datetime.now(UTC) + 2 * DAY)

    assert (result.expired, result.deleted, result.failures) == (1, 2, 0)
    assert result.deleted_ids == [child, doomed.id]
    assert store.threads.get(doomed.id) is None and store.threads.get(child) is None
    assert await _forgotten(temporal_client, doomed.id)
    assert [(e.subject, e.method, e.status) for e in store.audit.list(thread_id=doomed.id)] == [
        ("retention", "DELETE", 200)
    ]
    assert [e.subject for e in store.audit.list(thread_id=child)] == ["retention"]
    assert store.threads.get(kept.id) is not None
    row = store.threads.get(running.id)
    assert row is not None and not await _forgotten(temporal_client, running.id)
    # A second sweep finds nothing left to do.
    again = await retention.run_now(now=datetime.now(UTC) + 2 * DAY)
    assert (again.expired, again.deleted) == (0, 0)
    await running.terminate(reason="test cleanup")


async def test_batches_continue_as_new_and_a_tenant_ttl_applies(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """Rows past their tenant's TTL, more than one run's batches: every one is deleted."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    worker = await start_worker(agent_definitions(script))  # no agent TTL
    store = worker.store
    assert store is not None
    store.retention.set_tenant("acme", "1h")
    now = datetime.now(UTC)
    ids = [f"old-{i}-{uuid.uuid4().hex[:6]}" for i in range(5)]
    for i, thread_id in enumerate(ids):
        _row(
            store,
            thread_id,
            agent="helper",
            closed_at=now - 2 * DAY + i * timedelta(seconds=1),
            tenant="acme",
        )
    _row(store, "fresh", agent="helper", closed_at=now, tenant="acme")
    _row(store, "other-tenant", agent="helper", closed_at=now - 9 * DAY)
    retention = Retention(temporal_client, store, task_queue=worker.task_queue)

    result = await retention.run_now(now=now, batch_size=2, batches_per_run=1, parallel=2)

    assert result.runs == 3  # 2 + 2 + 1 threads: a short batch is the last
    assert result.deleted_ids == ids and result.deleted == 5
    assert store.threads.get("fresh") is not None
    assert store.threads.get("other-tenant") is not None
    # Bad input is refused naming the field, not retried for ever.
    with pytest.raises(WorkflowFailureError) as refused:
        await temporal_client.execute_workflow(
            RETENTION_WORKFLOW_TYPE,
            {"batchSize": 0},
            id=f"bad-sweep-{uuid.uuid4().hex[:8]}",
            task_queue=worker.task_queue,
        )
    assert "invalid RetentionSweep input: field 'batchSize'" in str(refused.value.cause)


# -- the schedule -----------------------------------------------------------------------


def _config_file(weft_config: WeftConfig, tmp_path: Path, task_queue: str | None = None) -> str:
    path = tmp_path / "weft.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {
                    "address": weft_config.temporal.address,
                    "task_queue": task_queue or weft_config.temporal.task_queue,
                },
                "store": {"url": weft_config.store_url()},
                "definitions": str(tmp_path / "defs"),
            }
        )
    )
    agents = tmp_path / "defs" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "helper.yaml").write_text("sideA:\n  prompt: p\nretention:\n  closedThreadsTtl: 7d\n")
    return str(path)


async def test_schedule_enable_status_disable(
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    weft_config: WeftConfig,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    worker = await start_worker(agent_definitions(script))
    config = _config_file(weft_config, tmp_path, worker.task_queue)
    store = worker.store
    assert store is not None
    store.retention.set_tenant("default", "1s")
    _row(store, "expired-one", agent="helper", closed_at=datetime.now(UTC) - DAY)

    def cli(*args: str) -> int:
        return weft_cli(["--config", config, "retention", *args])

    assert await asyncio.to_thread(cli, "disable") == 0
    assert "not enabled" in capsys.readouterr().out
    try:
        assert await asyncio.to_thread(cli, "enable", "--every", "2h") == 0
        assert "created schedule weft-retention: a sweep every 2h" in capsys.readouterr().out
        assert await asyncio.to_thread(cli, "enable", "--every", "1h") == 0
        assert "updated schedule weft-retention" in capsys.readouterr().out
        await temporal_client.get_schedule_handle("weft-retention").trigger()
        retention = Retention(temporal_client, store, task_queue=worker.task_queue)
        deadline = asyncio.get_running_loop().time() + 30
        status = await retention.status()
        while not (status.runs and status.runs[-1].result is not None):
            assert asyncio.get_running_loop().time() < deadline, status
            await asyncio.sleep(0.2)
            status = await retention.status()
        assert status.runs[-1].result is not None
        assert status.runs[-1].result.deleted_ids == ["expired-one"]

        assert await asyncio.to_thread(cli, "status") == 0
        out = capsys.readouterr().out
        assert "schedule: weft-retention, every 1h, active" in out
        assert "next run: 20" in out and "last run: 20" in out
        assert "completed\tdeleted 1 threads (1 expired)" in out
        assert "  default\t1s" in out and "  helper\t7d" in out
    finally:
        assert await asyncio.to_thread(cli, "disable") == 0
    assert "deleted schedule weft-retention" in capsys.readouterr().out
    assert await asyncio.to_thread(cli, "status") == 0
    assert "schedule: not enabled" in capsys.readouterr().out


# -- migration 0017 ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_migration_adds_tenant_ttls_and_goes_back(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = (
        f"sqlite:///{tmp_path / 'old.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("postgres_databases")()
    )
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    config = alembic_config()
    now = datetime.now(UTC)
    try:
        upgrade(engine, "0016")
        assert "retention_policies" not in inspect(engine).get_table_names()
        with Store(engine) as store:
            _row(store, "old", agent="helper", closed_at=now - 2 * DAY)
        upgrade(engine)
        names = {i["name"] for i in inspect(engine).get_indexes("threads")}
        assert "ix_threads_status_updated_at" in names
        with Store(engine) as store:
            store.retention.set_tenant("default", "1d")
            assert [t.thread_id for t in store.retention.expired(now, {})] == ["old"]
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0016")
        assert "retention_policies" not in inspect(engine).get_table_names()
        names = {i["name"] for i in inspect(engine).get_indexes("threads")}
        assert "ix_threads_status_updated_at" not in names
    finally:
        engine.dispose()
