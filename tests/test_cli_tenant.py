"""`weft --tenant T` (and `WEFT_TENANT`): the CLI acts for one tenant. Another tenant's
thread is `not found`, worded as an unknown one; `thread list` shows T's threads; a start
is T's; a command that cannot keep to one tenant refuses to run. Without it the CLI is the
operator (docs/tenants.md). Against the session's dev server and a worker."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from support import add_script, agent_definitions, store_of, until, weft_cli

from weft.cli.main import run as run_cli
from weft.client.actions import waiting_query
from weft.client.thread_tenant import tenant_clause
from weft.client.threads import Threads
from weft.workers.config import WeftConfig

# The weather question asks for a tool that waits for permission (the inbox lists it).
SCRIPT = {
    "turns": [
        {
            "match": "weather",
            "replies": [{"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}],
        },
        {"match": "*", "replies": [{"text": "hi there"}]},
    ]
}


def _cli_config(tmp_path: Path, weft_config: WeftConfig, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": task_queue}
    path.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    return path


async def test_the_cli_acts_for_one_tenant(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path, capsys, monkeypatch
):
    script = add_script(scripted_server, SCRIPT)
    worker = await start_worker(agent_definitions(script, permissions={"mode": "default"}))
    store = store_of(worker)
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=store)
    ours = (await threads.start("helper", messages=["weather in Oslo?"], tenant="acme")).id
    theirs = (await threads.start("helper", tenant="globex")).id
    await until(lambda: store.threads.tenant(theirs), "globex's thread row")

    def cli(*args: str) -> tuple[int, str, str]:
        code = run_cli(["--config", str(config), *args])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    async def weft_(*args: str) -> tuple[int, str, str]:
        return await asyncio.to_thread(cli, *args)

    # Another tenant's thread is not found, exactly as an unknown one, and nothing is done.
    unknown = await weft_("--tenant", "acme", "thread", "show", "no-such-thread")
    assert unknown[0] == 1 and unknown[2] == "weft: thread 'no-such-thread' not found\n"
    for command in (
        ("show", theirs),
        ("send", theirs, "hi"),
        ("terminate", theirs),
        ("budget", theirs, "--max-tokens", "10"),
        ("delete", theirs, "--yes"),
    ):
        code, _, err = await weft_("--tenant", "acme", "thread", *command)
        assert (code, err) == (1, f"weft: thread {theirs!r} not found\n"), command
    assert store.threads.tenant(theirs) == "globex"  # not deleted
    assert [e for e in store.audit.list() if e.thread_id == theirs] == []  # nothing done
    assert (await threads.read(theirs)).status != "completed"

    # Its own thread it reaches, from WEFT_TENANT too (and as a real process).
    monkeypatch.setenv("WEFT_TENANT", "acme")
    code, out, err = await weft_("thread", "show", ours)
    assert code == 0 and f'"threadId": "{ours}"' in out, err
    code, out, err = await weft_cli(config, "thread", "show", theirs)
    assert (code, err) == (1, f"weft: thread {theirs!r} not found\n")
    monkeypatch.delenv("WEFT_TENANT")

    # A start is the tenant's; naming another is refused before anything runs.
    code, out, err = await weft_("--tenant", "acme", "thread", "start", "helper")
    assert code == 0, err
    started = out.strip()
    assert await until(lambda: store.threads.tenant(started), "the start's row") == "acme"
    code, _, err = await weft_("--tenant", "acme", "thread", "start", "helper", "--tenant", "x")
    assert code == 2 and "tenant 'x': the CLI acts for tenant 'acme' (--tenant)" in err
    # A chosen id is refused alike whether free or another tenant's (nothing said of
    # whose), and a free id in the tenant's own space is taken.
    for chosen in (theirs, "free-id"):
        code, _, err = await weft_("--tenant", "acme", "thread", "start", "helper", "--id", chosen)
        assert code == 1 and f"thread id {chosen!r} is not available to tenant 'acme'" in err
    code, out, err = await weft_(
        "--tenant", "acme", "thread", "start", "helper", "--id", "acme:chosen"
    )
    assert (code, out.strip()) == (0, "acme:chosen"), err
    code, _, err = await weft_(
        "--tenant", "acme", "thread", "fork", ours, "--at", "1", "--id", theirs
    )
    assert code == 1 and f"thread id {theirs!r} is not available to tenant 'acme'" in err
    # Nor may it make a key that reaches every tenant.
    code, _, err = await weft_(
        "--tenant", "acme", "key", "create", "--tenant", "acme", "--scopes", "admin"
    )
    assert code == 2 and "--scopes admin: the CLI acts for tenant 'acme'" in err, err
    code, _, err = await weft_("--tenant", "a b", "thread", "list")
    assert code == 2 and err.startswith("weft: --tenant: tenant 'a b'"), err
    code, _, err = await weft_("--tenant", "acme", "eval", "suite")
    assert code == 2 and "weft: eval does not act for one tenant yet" in err, err

    # The listing shows the tenant's threads only (visibility catches up: bounded wait).
    async def listed(*flags: str) -> set[str]:
        code, out, err = await weft_(*flags, "thread", "list")
        assert code == 0, err
        return {line.split("\t")[0] for line in out.splitlines()}

    everyone = {ours, theirs, started, "acme:chosen"}
    for _ in range(100):
        if everyone <= await listed():
            break
        await asyncio.sleep(0.1)
    assert everyone <= await listed()  # the operator sees every tenant's
    assert await listed("--tenant", "acme") == {ours, started, "acme:chosen"}
    assert await listed("--tenant", "globex") == {theirs}

    # So does the inbox: acme's thread waits for a permission; globex's inbox is empty.
    for _ in range(100):
        code, out, err = await weft_("--tenant", "acme", "inbox")
        if ours in out:
            break
        await asyncio.sleep(0.1)
    assert code == 0 and out.startswith(f"{ours}\thelper\ttool_permission"), (out, err)
    code, out, err = await weft_("--tenant", "globex", "inbox")
    assert (code, out, err) == (0, "", "no thread is waiting on a human\n")
    assert ours in (await weft_("inbox"))[1]  # the operator's inbox has every tenant's

    # `weft audit` under --tenant is that tenant's log.
    code, out, err = await weft_("--tenant", "globex", "audit")
    assert (code, out) == (0, "no control actions recorded\n"), err
    code, out, _ = await weft_("--tenant", "acme", "audit")
    # its two starts (the refused ones were refused before anything was done)
    assert code == 0 and out.count("POST /threads  201") == 2 and out.count("\n") == 2, out
    for thread_id in (ours, theirs, started, "acme:chosen"):
        await threads.terminate(thread_id)


def test_the_tenant_clauses():
    """A tenant's visibility clause (the `default` tenant's takes threads started without
    one); a name that is no tenant's is refused before it reaches a query."""
    assert tenant_clause("acme") == "WeftTenant = 'acme'"
    assert tenant_clause("default") == "(WeftTenant = 'default' OR WeftTenant IS NULL)"
    assert "AND WeftTenant = 'acme' AND" in waiting_query(tenant="acme")
    with pytest.raises(ValueError, match='tenant "a\' OR 1=1"'):
        tenant_clause("a' OR 1=1")
