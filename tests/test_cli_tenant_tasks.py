"""The last tenant gaps of the CLI and HTTP (docs/tenants.md): `weft --tenant T` keeps the
task and job commands to T's tasks and jobs (another tenant's is `no task 'x'`, worded as an
unknown one; listings are T's; creates and runs are T's); the CLI's task, job, schedule and
fork commands are in the audit log once each, as `cli:<os user>` with the tenant acted on;
and `POST /threads` takes a `tenant` from the operator. Against the session's dev server
and a worker, the CLI run in-process as `weft` runs it."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import NoReturn

import yaml
from api_support import api_stack
from support import add_script, agent_definitions, idle_after, sequence_of, store_of, until
from support import wait_until as read_until

from weft.cli.main import run as run_cli
from weft.cli.thread_guard import cli_subject
from weft.client.threads import Threads
from weft.contract.tasks import TaskRecord
from weft.store import Store
from weft.store.audit import AuditEntry
from weft.workers.config import WeftConfig

SCRIPT = {"turns": [{"match": "*", "replies": [{"text": "done"}]}]}


def _cli_config(tmp_path: Path, weft_config: WeftConfig, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": task_queue}
    path.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    return path


def _entries(store: Store, route: str, path: str) -> list[AuditEntry]:
    """The CLI's audit entries of one action (a route template and the path it names)."""
    return [
        e
        for e in store.audit.list(subject=cli_subject(), limit=1000)
        if e.route == route and e.path == path
    ]


def _task(store: Store, task_id: str) -> TaskRecord:
    record = store.tasks.get(task_id)
    assert record is not None, task_id
    return record


def _never() -> NoReturn:
    raise AssertionError("the job is gone")


async def _tenant_of(store: Store, thread_id: str) -> str:
    """The tenant of the thread's row, once its worker wrote it."""
    found: str = await until(lambda: store.threads.tenant(thread_id), f"{thread_id}'s row")
    return found


async def test_task_and_job_commands_keep_to_the_tenant_and_are_audited_once(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path, capsys
):
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    store = store_of(worker)
    config = _cli_config(tmp_path, weft_config, worker.task_queue)

    def cli(*args: str) -> tuple[int, str, str]:
        code = run_cli(["--config", str(config), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    async def weft_(*args: str) -> tuple[int, str, str]:
        return await asyncio.to_thread(cli, *args)

    def once(route: str, path: str) -> AuditEntry:
        found = _entries(store, route, path)
        assert len(found) == 1, (route, path, found)
        return found[0]

    # Creates under --tenant are the tenant's, recorded once with it.
    code, out, err = await weft_("--tenant", "acme", "task", "create", "helper", "x", "--no-start")
    assert code == 0, err
    ours = out.strip()
    assert store.tasks.tenant(ours) == "acme"
    entry = once("/tasks", "/tasks")
    assert (entry.tenant, entry.method, entry.status) == ("acme", "POST", 201)
    code, out, err = await weft_(
        "task", "create", "helper", "y", "--no-start", "--tenant", "globex"
    )
    assert code == 0, err
    theirs = out.strip()
    assert store.tasks.tenant(theirs) == "globex"
    code, _, err = await weft_("--tenant", "acme", "task", "create", "helper", "z", "--tenant", "b")
    assert code == 2 and "tenant 'b': the CLI acts for tenant 'acme' (--tenant)" in err, err

    # Another tenant's task is `no task 'x'`, exactly as an unknown one, and nothing is done
    # or recorded; a dependency on it is refused as one on an unknown task.
    unknown = f"task-{uuid.uuid4().hex[:12]}"
    for task_id in (theirs, unknown):
        for command in (("get",), ("cancel",), ("pause",), ("progress", "m"), ("retry",)):
            verb, *rest = command
            code, _, err = await weft_("--tenant", "acme", "task", verb, task_id, *rest)
            assert (code, err) == (1, f"weft: no task {task_id!r}\n"), (command, err)
        code, _, err = await weft_(
            "--tenant", "acme", "task", "create", "helper", "w", "--depends-on", task_id
        )
        assert (code, err) == (1, f"weft: dependencies: no task {task_id!r}\n"), err
        code, _, err = await weft_("--tenant", "acme", "task", "link", ours, task_id)
        assert (code, err) == (1, f"weft: dependsOn: no task {task_id!r}\n"), err
    assert [e for e in store.audit.list(limit=1000) if theirs in e.path] == []
    assert _task(store, theirs).status == "accepted"  # neither cancelled nor paused

    # The listing is the tenant's; the operator's is every tenant's.
    code, out, _ = await weft_("--tenant", "acme", "task", "list")
    listed = {line.split("\t")[0] for line in out.splitlines()}
    assert ours in listed and theirs not in listed
    assert store.tasks.tenant(next(iter(listed))) == "acme"
    code, out, _ = await weft_("task", "list", "--limit", "500")
    assert {ours, theirs} <= {line.split("\t")[0] for line in out.splitlines()}

    # Its own task's commands are recorded once each, with the task's tenant and status;
    # a command the task's state refuses is recorded as refused (409), never as done.
    code, _, err = await weft_("--tenant", "acme", "task", "pause", ours, "--reason", "wait")
    assert code == 0, err
    code, _, err = await weft_("--tenant", "acme", "task", "progress", ours, "half")
    assert code == 0, err
    code, _, err = await weft_("--tenant", "acme", "task", "cancel", ours)
    assert code == 0, err
    await until(lambda: _task(store, ours).status == "cancelled", "the task cancelled")
    code, _, err = await weft_("--tenant", "acme", "task", "resume", ours)
    assert code == 1 and "it is cancelled" in err, err
    for verb, status in (("pause", 202), ("progress", 202), ("cancel", 202), ("resume", 409)):
        entry = once(f"/tasks/{{task_id}}/{verb}", f"/tasks/{ours}/{verb}")
        assert (entry.tenant, entry.method, entry.status) == ("acme", "POST", status)
    # The operator's refusal on an unknown task is recorded as the HTTP API's 404.
    code, _, err = await weft_("task", "cancel", unknown)
    assert (code, err) == (1, f"weft: no task {unknown!r}\n")
    assert once("/tasks/{task_id}/cancel", f"/tasks/{unknown}/cancel").status == 404

    # A deletion is recorded once, by the deletion itself.
    code, _, err = await weft_("--tenant", "acme", "task", "delete", ours, "--yes")
    assert code == 0, err
    assert len([e for e in store.audit.list(limit=1000) if e.path == f"/tasks/{ours}"]) == 1

    # A job run under --tenant is the tenant's; another tenant's job is `no job 'x'`.
    items = tmp_path / "items.jsonl"
    items.write_text('"one"\n')
    code, out, err = await weft_("--tenant", "acme", "job", "run", "helper", "--items", str(items))
    assert code == 0, err
    job = out.strip()
    assert store.jobs.tenant(job) == "acme"
    entry = once("/jobs", "/jobs")
    assert (entry.tenant, entry.method, entry.status) == ("acme", "POST", 201)
    for command in (("status",), ("results",), ("cancel",), ("resume",), ("delete", "--yes")):
        verb, *rest = command
        code, _, err = await weft_("--tenant", "globex", "job", verb, job, *rest)
        assert (code, err) == (1, f"weft: no job {job!r}\n"), (command, err)
    assert await weft_("--tenant", "globex", "job", "list") == (0, "no jobs\n", "")
    code, out, _ = await weft_("--tenant", "acme", "job", "list")
    assert job in out
    await until(lambda: (store.jobs.get(job) or _never()).terminal, "the job ended", timeout=60)
    code, _, err = await weft_("--tenant", "acme", "job", "cancel", job)
    assert code == 1 and "cannot cancel job" in err, err
    entry = once("/jobs/{job_id}/cancel", f"/jobs/{job}/cancel")
    assert (entry.tenant, entry.status) == ("acme", 409)  # refused: the job had ended


async def test_schedule_and_fork_commands_are_audited_once(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path, capsys
):
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    store = store_of(worker)
    config = _cli_config(tmp_path, weft_config, worker.task_queue)

    def cli(*args: str) -> tuple[int, str, str]:
        code = run_cli(["--config", str(config), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    async def weft_(*args: str) -> tuple[int, str, str]:
        code, out, err = await asyncio.to_thread(cli, *args)
        assert code == 0, (args, err)
        return code, out, err

    # A schedule's actions, each with the schedule's tenant.
    name = f"audited-{uuid.uuid4().hex[:8]}"
    await weft_(
        "--tenant",
        "acme",
        "schedule",
        "create",
        name,
        "--every",
        "1h",
        "--agent",
        "helper",
        "-m",
        "good morning",
    )
    # The operator names acme's schedule in full; every entry does, the create's too.
    full = f"acme:{name}"
    for action in ("pause", "unpause", "delete"):
        await weft_("schedule", action, full)
    expected = {
        ("POST", "/schedules/{name}", f"/schedules/{full}", 201),
        ("POST", "/schedules/{name}/pause", f"/schedules/{full}/pause", 200),
        ("POST", "/schedules/{name}/unpause", f"/schedules/{full}/unpause", 200),
        ("DELETE", "/schedules/{name}", f"/schedules/{full}", 200),
    }
    recorded = [e for e in store.audit.list(subject=cli_subject(), limit=1000) if name in e.path]
    assert sorted((e.method, e.route, e.path, e.status) for e in recorded) == sorted(expected)
    assert {e.tenant for e in recorded} == {"acme"}

    # A fork, with its source's tenant.
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    source = (await threads.start("helper", messages=["hi"], tenant="acme")).id
    await read_until(temporal_client.get_workflow_handle(source), idle_after(1))
    end = next(e for e in store.events.read(source, limit=1000) if e.type == "turn.completed")
    await weft_("--tenant", "acme", "thread", "fork", source, "--at", str(sequence_of(end)))
    forks = [e for e in store.audit.list(thread_id=source) if e.route.endswith("/fork")]
    assert [(e.subject, e.tenant, e.status) for e in forks] == [(cli_subject(), "acme", 201)]
    await threads.terminate(source)


async def test_the_operator_starts_a_tenants_thread_over_http(
    start_worker, temporal_client, scripted_server, weft_config
):
    worker = await start_worker(agent_definitions(add_script(scripted_server, SCRIPT)))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        # The server's token (and an admin key) names any tenant.
        admin = stack.store.api_keys.create("ops", ["admin"]).secret
        started = []
        for auth in ({}, {"Authorization": f"Bearer {admin}"}):
            reply = await stack.http.post(
                "/threads", json={"agent": "helper", "tenant": "acme"}, headers=auth
            )
            assert reply.status_code == 201, reply.text
            started.append(reply.json()["threadId"])
        for thread_id in started:
            assert await _tenant_of(stack.store, thread_id) == "acme"
        # A name that is no tenant's is 422 naming the field.
        reply = await stack.http.post("/threads", json={"agent": "helper", "tenant": "a b"})
        assert reply.status_code == 422 and "tenant" in reply.json()["fields"], reply.text
        assert "tenant 'a b'" in reply.json()["error"]
        # A tenant's key names its own tenant only; another is 403 naming `tenant`.
        key = stack.store.api_keys.create("acme", ["threads:write"]).secret
        auth = {"Authorization": f"Bearer {key}"}
        body = {"agent": "helper", "tenant": "globex"}
        reply = await stack.http.post("/threads", json=body, headers=auth)
        assert (reply.status_code, reply.json()["fields"]) == (403, ["tenant"]), reply.text
        assert reply.json()["error"] == (
            "tenant 'globex': this key starts threads of tenant 'acme' only"
        )
        reply = await stack.http.post("/threads", json={**body, "tenant": "acme"}, headers=auth)
        assert reply.status_code == 201, reply.text
        own = reply.json()["threadId"]
        assert await _tenant_of(stack.store, own) == "acme"
        for thread_id in (*started, own):
            await stack.ctx.threads.terminate(thread_id)
