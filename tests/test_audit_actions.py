"""Every control action through the Python client and the CLI is in the audit log once,
with who did it (`python`, `cli:<os user>`), the tenant of what it acted on and how it
ended; an HTTP request is recorded once, by the server, though its handler uses the same
client (docs/tenants.md#audit). Against the session's dev server, a worker on the scripted
model and the worker's SQLite store."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_support import api_stack
from support import add_script, agent_definitions, store_of, until, weft_cli
from temporalio.client import WorkflowUpdateFailedError
from temporalio.service import RPCError

import weft
from weft.cli.main import run as run_cli
from weft.cli.thread_guard import cli_subject
from weft.client.audit_trail import AuditTrail, ControlAction, refusal_status
from weft.client.threads import Threads
from weft.store import Store
from weft.store.audit import AuditEntry
from weft.store.tenant_quotas import QuotaExceeded
from weft.workers.config import WeftConfig

SCRIPT = {"turns": [{"replies": [{"text": "hi there"}]} for _ in range(8)]}


def _actions(
    store: Store,
    *,
    thread_id: str | None = None,
    tenant: str | None = None,
    subject: str | None = None,
) -> list[tuple[str, str | None, str, str, int]]:
    """(subject, tenant, method, route, status) of each entry, oldest first."""
    found = store.audit.list(thread_id=thread_id, tenant=tenant, subject=subject)
    return [(e.subject, e.tenant, e.method, e.route, e.status) for e in found]


def _cli_config(tmp_path: Path, weft_config: WeftConfig, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": task_queue}
    path.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    return path


async def test_every_python_action_is_audited_once_with_its_outcome(
    start_worker, temporal_client, scripted_server
):
    """`weft.Thread` with a store records each control action as `python`, with the
    thread's tenant; a refusal is recorded as refused (its status), never as done; a
    `Thread` without a store has no log to write to and records nothing."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    store = store_of(worker)
    thread = await weft.Thread.start(
        temporal_client, "helper", store=store, task_queue=worker.task_queue, tenant="acme"
    )
    assert (await thread.ask("hello")).status == "completed"
    await thread.send("and more")
    await thread.set_budget({"maxTokens": 100_000})
    await thread.interrupt()
    await thread.upgrade()
    with pytest.raises(WorkflowUpdateFailedError):
        await thread.respond("act_missing", "approve")
    unaudited = weft.Thread(temporal_client, thread.id, task_queue=worker.task_queue)
    await unaudited.refresh_tools()  # no store: nothing recorded
    await thread.terminate("done")
    await thread.result()
    with pytest.raises(RPCError):
        await thread.send("too late")  # the thread is closed: refused, recorded as 404

    acme = "acme"
    assert _actions(store, thread_id=thread.id) == [
        ("python", acme, "POST", "/threads", 201),
        ("python", acme, "POST", "/threads/{thread_id}/turns", 200),
        ("python", acme, "POST", "/threads/{thread_id}/messages", 202),
        ("python", acme, "POST", "/threads/{thread_id}/budget", 200),
        ("python", acme, "POST", "/threads/{thread_id}/interrupt", 200),
        ("python", acme, "POST", "/threads/{thread_id}/upgrade", 200),
        ("python", acme, "POST", "/threads/{thread_id}/actions/{action_id}", 409),
        ("python", acme, "POST", "/threads/{thread_id}/terminate", 202),
        ("python", acme, "POST", "/threads/{thread_id}/messages", 404),
    ]
    [respond] = store.audit.list(thread_id=thread.id, limit=100)[6:7]
    assert respond.path == f"/threads/{thread.id}/actions/act_missing"
    assert [e.thread_id for e in store.audit.list(tenant=acme)] == [thread.id] * 9


async def test_refused_starts_are_recorded_as_refused(
    start_worker, temporal_client, scripted_server
):
    """A start refused before anything runs (a quota, a taken id) is recorded with the
    refusal's status and the tenant it named."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    store = store_of(worker)
    store.tenant_quotas.set("capped", max_active_threads=1, max_tokens=None, max_cost_usd=None)
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store, audit_as="python")
    first = await threads.start("helper", tenant="capped")
    await until(lambda: store.threads.tenant(first.id), "the first thread's row")
    with pytest.raises(QuotaExceeded):
        await threads.start("helper", tenant="capped")
    await threads.terminate(first.id)
    handle = await threads.start("helper", tenant="globex")
    with pytest.raises(Exception, match="already"):
        await threads.start("helper", thread_id=handle.id, tenant="globex")
    await threads.terminate(handle.id)
    assert _actions(store, tenant="capped") == [
        ("python", "capped", "POST", "/threads", 201),
        ("python", "capped", "POST", "/threads", 429),
        ("python", "capped", "POST", "/threads/{thread_id}/terminate", 202),
    ]
    assert _actions(store, tenant="globex") == [
        ("python", "globex", "POST", "/threads", 201),
        ("python", "globex", "POST", "/threads", 409),
        ("python", "globex", "POST", "/threads/{thread_id}/terminate", 202),
    ]
    with pytest.raises(ValueError, match="needs a store"):
        Threads(temporal_client, audit_as="python")


async def test_an_http_action_is_recorded_once(
    start_worker, temporal_client, scripted_server, weft_config
):
    """The HTTP API's handlers drive the same `Threads`, without a trail: each request is
    in the log once, as the server's middleware records it."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        started = await stack.http.post("/threads", json={"agent": "helper"})
        assert started.status_code == 201, started.text
        thread_id = started.json()["threadId"]
        sent = await stack.http.post(
            f"/threads/{thread_id}/messages", json={"role": "user", "content": "hi"}
        )
        assert sent.status_code == 202, sent.text
        stopped = await stack.http.post(f"/threads/{thread_id}/terminate", json={})
        assert stopped.status_code == 202, stopped.text
        assert [(s, m, r, st) for s, _, m, r, st in _actions(stack.store, subject="token")] == [
            ("token", "POST", "/threads", 201),
            ("token", "POST", "/threads/{thread_id}/messages", 202),
            ("token", "POST", "/threads/{thread_id}/terminate", 202),
        ]
        assert len(stack.store.audit.list(limit=1000)) == 3


async def test_every_cli_action_is_audited_once(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path, capsys
):
    """Each control action of the `weft` command (in-process, and two as real
    subprocesses) is recorded as `cli:<os user>` with its tenant; pure reads are not;
    `weft audit --tenant` lists a tenant's."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    config = str(_cli_config(tmp_path, weft_config, worker.task_queue))

    def cli(*args: str) -> int:
        return run_cli(["--config", config, *args])

    async def weft_(*args: str) -> int:
        return await asyncio.to_thread(cli, *args)

    store = store_of(worker)
    assert await weft_("thread", "start", "helper", "--tenant", "acme", "--id", "t-cli") == 0
    thread_id = "t-cli"
    assert await weft_("thread", "ask", thread_id, "hello") == 0
    assert await weft_("thread", "budget", thread_id, "--max-tokens", "90000") == 0
    assert await weft_("thread", "budget", thread_id) == 0  # a read: not recorded
    assert await weft_("thread", "show", thread_id) == 0  # a read: not recorded
    assert await weft_("thread", "interrupt", thread_id) == 0
    assert await weft_("thread", "upgrade", thread_id) == 0
    assert await weft_("thread", "compact", thread_id) == 0
    assert await weft_("thread", "respond", thread_id, "act_missing", "approve") == 1
    code, _, err = await weft_cli(Path(config), "thread", "send", thread_id, "more")  # a process
    assert code == 0, err
    assert await weft_("thread", "terminate", thread_id) == 0
    assert await weft_("key", "create", "--tenant", "acme", "--scopes", "threads:read") == 0
    [key] = store.api_keys.list(tenant="acme")
    assert await weft_("key", "revoke", key.key_id) == 0
    assert await weft_("tenant", "quota", "set", "acme", "--max-active-threads", "9") == 0
    assert await weft_("tenant", "quota", "show", "acme") == 0  # a read
    assert await weft_("tenant", "quota", "clear", "acme") == 0
    assert await weft_("retention", "set", "--tenant", "acme", "--ttl", "30d") == 0
    assert await weft_("retention", "clear", "--tenant", "acme") == 0

    me = cli_subject()
    assert me.startswith("cli")
    on_thread = "/threads/{thread_id}"
    assert _actions(store, tenant="acme") == [
        (me, "acme", "POST", "/threads", 201),
        (me, "acme", "POST", on_thread + "/turns", 200),
        (me, "acme", "POST", on_thread + "/budget", 200),
        (me, "acme", "POST", on_thread + "/interrupt", 200),
        (me, "acme", "POST", on_thread + "/upgrade", 200),
        (me, "acme", "POST", on_thread + "/compact", 202),
        (me, "acme", "POST", on_thread + "/actions/{action_id}", 409),
        (me, "acme", "POST", on_thread + "/messages", 202),
        (me, "acme", "POST", on_thread + "/terminate", 202),
        (me, "acme", "POST", "/keys/{key_id}", 201),
        (me, "acme", "POST", "/keys/{key_id}/revoke", 200),
        (me, "acme", "PUT", "/tenants/{tenant}/quota", 200),
        (me, "acme", "DELETE", "/tenants/{tenant}/quota", 200),
        (me, "acme", "PUT", "/tenants/{tenant}/retention", 200),
        (me, "acme", "DELETE", "/tenants/{tenant}/retention", 200),
    ]
    revoked = store.audit.list(tenant="acme")[10]
    assert revoked.path == f"/keys/{key.key_id}/revoke" and revoked.thread_id is None

    # `weft audit` lists them per tenant, as a real process: another tenant sees none.
    code, out, err = await weft_cli(Path(config), "audit", "--tenant", "acme", "--json")
    assert code == 0, err
    listed: list[dict[str, Any]] = json.loads(out)
    assert [(e["subject"], e["route"], e["status"]) for e in listed] == [
        (s, r, st) for s, _, _, r, st in _actions(store, tenant="acme")
    ]
    assert await weft_("--tenant", "globex", "audit") == 0
    assert capsys.readouterr().out.strip().endswith("no control actions recorded")


def test_a_lost_record_does_not_fail_the_action(tmp_path, caplog):
    """The audit log cannot be written: the action's own outcome stands, the loss is
    logged; statuses are the HTTP API's words."""
    path = tmp_path / "weft.db"
    store = Store.open(f"sqlite:///{path}")
    trail = AuditTrail(store, "python")
    with sqlite3.connect(path) as db:  # every record now fails
        db.execute("DROP TABLE audit_log")

    async def act() -> int:
        async with trail.acting(ControlAction("POST", "/keys/{key_id}"), key_id="k1") as done:
            return done.status

    assert asyncio.run(act()) == 200
    assert "could not record POST /keys/{key_id} by python" in caplog.text
    assert refusal_status(QuotaExceeded("acme", "maxTokens", 1, 2)) == 429
    assert refusal_status(ValueError("bad")) == 422
    with pytest.raises(ValueError, match="audit subject"):
        AuditTrail(store, "x" * 65)
    store.close()


def test_an_entry_keeps_its_fields(tmp_path):
    """Entries written by the trail read back as written (the `weft audit` fields)."""
    with Store.open(f"sqlite:///{tmp_path / 'weft.db'}") as store:
        trail = AuditTrail(store, "cli:alice")
        quota = ControlAction("PUT", "/tenants/{tenant}/quota")
        asyncio.run(trail.record(quota, 200, tenant="acme"))
        [entry] = store.audit.list(subject="cli:alice")
        assert isinstance(entry, AuditEntry)
        assert (entry.method, entry.route, entry.path, entry.tenant, entry.thread_id) == (
            "PUT",
            "/tenants/{tenant}/quota",
            "/tenants/acme/quota",
            "acme",
            None,
        )
