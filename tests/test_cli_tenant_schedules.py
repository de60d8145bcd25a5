"""`weft --tenant T` on schedules and imports (docs/tenants.md): every schedule command
keeps to T's schedules (another tenant's is `no schedule named 'x'`, worded as a missing
one, and nothing is done or recorded; the listing is T's), and `weft thread import` lands
the thread in T, whatever tenant the bundle names, under an id T may choose, as `POST
/threads/import` with T's key does. `weft` runs as a real process, against the session's
dev server."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
import yaml
from bundle_support import closed_thread
from schedule_support import cli_config, eventually, schedule_name, weft_ok
from support import add_script, agent_definitions, idle_after, wait_until, weft_cli

from weft.cli.thread_guard import cli_subject
from weft.client.schedules import (
    SCHEDULE_MEMO,
    ScheduleError,
    ScheduleExists,
    ScheduleNotFound,
    Schedules,
)
from weft.store import Store
from weft.store.audit import AuditEntry
from weft.workers.config import WeftConfig


def _config(path: Path, weft_config: WeftConfig, store_url: str) -> Path:
    temporal = {
        "address": weft_config.temporal.address,
        "taskQueue": weft_config.temporal.task_queue,
    }
    path.write_text(yaml.safe_dump({"temporal": temporal, "store": {"url": store_url}}))
    return path


def _recorded(store: Store, name: str) -> list[AuditEntry]:
    """The CLI's audit entries naming schedule `name`."""
    entries = store.audit.list(subject=cli_subject(), limit=1000)
    return [e for e in entries if e.path.startswith(f"/schedules/{name}")]


async def test_schedule_commands_keep_to_the_cli_tenant(temporal_client, weft_config, tmp_path):
    config = _config(tmp_path / "cli.yml", weft_config, weft_config.store_url())
    store = await asyncio.to_thread(Store.open, weft_config.store_url())
    schedules = Schedules(temporal_client, task_queue=weft_config.temporal.task_queue)
    suffix = uuid.uuid4().hex[:8]
    ours, theirs, missing = f"ours-{suffix}", f"theirs-{suffix}", f"missing-{suffix}"
    # Each tenant's schedules are named in its own space; acting for acme, `ours` is acme's.
    acmes_ours, globexes_theirs = f"acme:{ours}", f"globex:{theirs}"

    async def acme(*args: str) -> tuple[int, str, str]:
        return await weft_cli(config, "--tenant", "acme", "schedule", *args)

    # Created under --tenant: the schedule is acme's (its own --tenant defaults to acme).
    code, out, err = await acme("create", ours, "--every", "1h", "--agent", "helper", "-m", "hi")
    assert code == 0 and out.startswith(f"created schedule {acmes_ours}: "), err
    assert "for tenant acme" in out
    created = await schedules.create(
        theirs, message="hi", agent="helper", every="1h", tenant="globex"
    )
    assert created.id == globexes_theirs
    try:
        # Its own schedule it shows, pauses, unpauses.
        for named in (ours, acmes_ours):
            code, out, err = await acme("show", named)
            assert code == 0, err
            assert (json.loads(out)["tenant"], json.loads(out)["name"]) == ("acme", acmes_ours)
        for action in ("pause", "unpause"):
            code, out, err = await acme(action, ours)
            assert (code, out) == (0, f"{action}d schedule {ours}\n"), err
        assert (await schedules.describe(acmes_ours)).paused is False
        assert (await schedules.describe(acmes_ours)).note == "unpaused with weft"

        # Another tenant's is a missing one, word for word, and nothing is done or recorded.
        not_acmes = (theirs, globexes_theirs, missing)
        for action in ("show", "pause", "unpause", "trigger", "delete"):
            refusals = [await acme(action, name) for name in not_acmes]
            refused = [(1, "", f"weft: no schedule named {name!r}\n") for name in not_acmes]
            assert refusals == refused, action
        described = await schedules.describe(globexes_theirs)
        assert (described.tenant, described.paused, described.runs) == ("globex", False, 0)
        for name in not_acmes:
            assert _recorded(store, name) == []
        # From Python alike: a `Schedules` of one tenant reaches its own only.
        confined = Schedules(temporal_client, tenant="acme")
        assert (await confined.describe(ours)).tenant == "acme"
        for name in (theirs, globexes_theirs):
            with pytest.raises(ScheduleNotFound, match=f"^no schedule named '{name}'$"):
                await confined.pause(name)
        with pytest.raises(ScheduleError, match="tenant 'globex': these schedules are"):
            await confined.list(tenant="globex")
        # Nor may it name another tenant's schedules to list.
        code, _, err = await acme("list", "--tenant", "globex")
        assert code == 2 and "tenant 'globex': the CLI acts for tenant 'acme'" in err, err

        # The listing is acme's only; the operator's has both (visibility catches up).
        async def listed(*flags: str) -> set[str]:
            code, out, err = await weft_cli(config, *flags, "schedule", "list")
            assert code == 0, err
            return {line.split("\t")[0] for line in out.splitlines()}

        await eventually(listed, lambda names: {acmes_ours, globexes_theirs} <= names)
        acmes = await listed("--tenant", "acme")
        assert acmes_ours in acmes and globexes_theirs not in acmes
        globexes = await listed("--tenant", "globex")
        assert globexes_theirs in globexes and acmes_ours not in globexes

        # Its own it deletes; each action recorded once, with acme as the tenant.
        code, out, err = await acme("delete", ours)
        assert (code, out) == (0, f"deleted schedule {ours}\n"), err
        code, _, err = await acme("show", ours)
        assert (code, err) == (1, f"weft: no schedule named {ours!r}\n")
        # Recorded under the schedule's full name, however the command named it.
        recorded = [(e.method, e.path, e.status, e.tenant) for e in _recorded(store, acmes_ours)]
        assert sorted(recorded) == sorted(
            [
                ("POST", f"/schedules/{acmes_ours}", 201, "acme"),
                ("POST", f"/schedules/{acmes_ours}/pause", 200, "acme"),
                ("POST", f"/schedules/{acmes_ours}/unpause", 200, "acme"),
                ("DELETE", f"/schedules/{acmes_ours}", 200, "acme"),
            ]
        )
    finally:
        for name in (acmes_ours, globexes_theirs):
            try:
                await schedules.delete(name)
            except ValueError:
                pass  # deleted by the test
        store.close()


async def test_an_import_under_a_tenant_lands_in_it(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """The bundle names `default` (its thread's tenant); imported under `--tenant acme`, the
    thread is acme's, and its id must be one acme may choose: the bundle's own (a free id
    outside acme's space) is refused as an HTTP import with acme's key is."""
    _, thread_id = await closed_thread(start_worker, temporal_client, scripted_server)
    source = _config(tmp_path / "source.yml", weft_config, weft_config.store_url())
    target_url = f"sqlite:///{tmp_path / 'target.db'}"
    target = _config(tmp_path / "target.yml", weft_config, target_url)
    bundle = tmp_path / "thread.weftbundle"
    code, _, err = await weft_cli(source, "thread", "export", thread_id, "-o", str(bundle))
    assert code == 0, err

    code, out, err = await weft_cli(target, "--tenant", "acme", "thread", "import", str(bundle))
    assert (code, out) == (1, ""), err
    assert f"weft: thread id {thread_id!r} is not available to tenant 'acme'" in err
    code, out, err = await weft_cli(
        target, "--tenant", "acme", "thread", "import", str(bundle), "--as", "acme:imported"
    )
    assert code == 0 and out.startswith("acme:imported  (closed; from "), err
    code, out, err = await weft_cli(
        target, "--tenant", "acme", "thread", "import", str(bundle), "--tenant", "globex"
    )
    assert code == 2 and "tenant 'globex': the CLI acts for tenant 'acme'" in err, err

    # The operator keeps the bundle's tenant, or re-homes it with the import's --tenant.
    for as_id, flags in (("plain-import", ()), ("globex-import", ("--tenant", "globex"))):
        code, _, err = await weft_cli(
            target, "thread", "import", str(bundle), "--as", as_id, *flags
        )
        assert code == 0, err
    code, _, err = await weft_cli(target, "thread", "import", str(bundle), "--tenant", "a b")
    assert code == 1 and "weft: --tenant: tenant 'a b'" in err, err
    code, _, err = await weft_cli(target, "thread", "import", str(bundle), "--as", "plain-import")
    assert code == 1 and "plain-import" in err, err

    store = await asyncio.to_thread(Store.open, target_url)
    try:
        tenants = {
            as_id: store.threads.tenant(as_id)
            for as_id in ("acme:imported", "plain-import", "globex-import")
        }
        assert tenants == {
            "acme:imported": "acme",
            "plain-import": "default",
            "globex-import": "globex",
        }
        assert store.threads.get(thread_id) is None  # the refused import wrote nothing
        # Each import the CLI made or refused for its own reason is in the audit log, as
        # `POST /threads/import` is; a refused tenant is refused before (nothing recorded).
        imports = [
            (e.thread_id, e.tenant, e.status)
            for e in store.audit.list(subject=cli_subject(), limit=1000)
            if e.route == "/threads/import"
        ]
        assert sorted(imports, key=str) == sorted(
            [
                ("acme:imported", "acme", 201),
                ("plain-import", "default", 201),
                ("globex-import", "globex", 201),
                (None, None, 409),
            ],
            key=str,
        ), imports
    finally:
        store.close()
    code, out, err = await weft_cli(target, "--tenant", "acme", "thread", "show", "acme:imported")
    assert code == 0 and json.loads(out)["threadId"] == "acme:imported", err
    code, _, err = await weft_cli(target, "--tenant", "globex", "thread", "show", "acme:imported")
    assert (code, err) == (1, "weft: thread 'acme:imported' not found\n")


async def test_each_tenant_names_its_schedules_in_its_own_space(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Tenants never contend for a schedule name: `default`, acme and globex each hold
    `NAME` (ids `NAME`, `acme:NAME`, `globex:NAME`). Acting for acme the bare name is
    acme's: `trigger NAME` starts an acme thread, which `thread list --schedule NAME`
    finds for acme and not for the operator (whose `NAME` is `default`'s), its first
    message naming the schedule in full. A schedule acme made before tenants had their own
    names (a bare id, acme in its memo) stays acme's by that name, and acme cannot make a
    second one of the name beside it."""
    script = add_script(scripted_server, {"replies": [{"text": "good night"}]})
    worker = await start_worker(agent_definitions(script))
    config = cli_config(tmp_path, weft_config, worker.task_queue)
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)
    name, legacy = schedule_name("nightly"), schedule_name("legacy")
    made: list[str] = []

    async def create(owner: str) -> str:
        handle = await schedules.create(
            name, message="night", agent="helper", every="1h", tenant=owner
        )
        made.append(handle.id)
        return handle.id

    async def acme(*args: str) -> tuple[int, str, str]:
        return await weft_cli(config, "--tenant", "acme", *args)

    try:
        assert [await create(owner) for owner in ("default", "acme", "globex")] == [
            name,
            f"acme:{name}",
            f"globex:{name}",
        ]
        code, _, err = await acme(
            "schedule", "create", name, "--every", "1h", "--agent", "helper", "-m", "again"
        )
        assert (code, err) == (1, f"weft: a schedule named 'acme:{name}' exists already\n")
        for owner, schedule_id in (("default", name), ("globex", f"globex:{name}")):
            described = await schedules.describe(schedule_id)
            assert (described.name, described.tenant) == (schedule_id, owner)

        code, out, err = await acme("schedule", "trigger", name)
        assert (code, out) == (0, f"triggered schedule {name}\n"), err
        listed = await eventually(
            lambda: weft_ok(config, "--tenant", "acme", "thread", "list", "--schedule", name),
            lambda out: bool(out.strip()),
        )
        [thread_id] = [line.split("\t")[0] for line in listed.splitlines()]
        operators = await weft_cli(config, "thread", "list", "--schedule", name)
        assert operators == (0, "", "no threads\n")
        state = await wait_until(temporal_client.get_workflow_handle(thread_id), idle_after(1))
        assert state.last_outcome == "good night"
        first = worker.store.messages.list(thread_id)[0]
        assert (first.content, first.metadata) == ("night", {"schedule": f"acme:{name}"})

        # A schedule of acme's from before: its bare id, acme's in its memo.
        former = await temporal_client.get_schedule_handle(f"acme:{name}").describe()
        await temporal_client.create_schedule(
            legacy,
            former.schedule,
            memo={SCHEDULE_MEMO: await former.memo_value(SCHEDULE_MEMO)},
        )
        made.append(legacy)
        confined = Schedules(temporal_client, task_queue=worker.task_queue, tenant="acme")
        described = await confined.describe(legacy)
        assert (described.name, described.tenant) == (legacy, "acme")
        with pytest.raises(ScheduleExists, match=f"^a schedule named '{legacy}' exists already$"):
            await confined.create(legacy, message="hi", agent="helper", every="1h")
        with pytest.raises(ScheduleNotFound, match=f"^no schedule named '{legacy}'$"):
            await Schedules(temporal_client, tenant="globex").describe(legacy)
    finally:
        for schedule_id in made:
            await schedules.delete(schedule_id)
