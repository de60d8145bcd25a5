"""`weft thread tools ID` and `weft thread environment ID` as real subprocesses: readable
lines live and after terminate (from the store), `--json` for the snapshot, names only."""

from __future__ import annotations

import asyncio
import json

import yaml
from inventory_support import SECRET, check_environment, check_inventory, definitions
from support import add_script, weft_cli

import weft


async def test_thread_tools_and_environment_live_and_closed(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Both commands print one line per tool / env name live and once the thread is closed,
    `--json` prints the snapshot, and the secret value is printed by neither."""
    worker = await start_worker(
        definitions(add_script(scripted_server, {"replies": [{"text": "hello"}]}))
    )
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    thread = await weft.Thread.start(
        temporal_client, "helper", env={"API_TOKEN": SECRET}, task_queue=worker.task_queue
    )
    await thread.ask("hi")  # the first model call lists the MCP server
    for source in ("live", "store"):
        # Each command is a process of its own that mostly imports weft: run side by side.
        commands = [
            ("thread", "tools", thread.id),
            ("thread", "tools", thread.id, "--json"),
            ("thread", "environment", thread.id),
            ("thread", "environment", thread.id, "--json"),
        ]
        tools, tools_json, environment, environment_json = await asyncio.gather(
            *(weft_cli(config, *command) for command in commands)
        )
        code, out, err = tools
        assert code == 0, err
        assert f"({source})" in out and "permission mode auto" in out
        lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.startswith("  ")}
        assert "ask (rule)" in lines["note"] and "deny (rule)" in lines["explode"]
        assert "DISABLED" in lines["auditor"] and "AUDIT_ON" in lines["auditor"]
        assert "from mcp tools.add" in lines["t_add"]
        assert "from prompt advisor" in lines["advisor"]
        code, out, err = tools_json
        assert code == 0, err
        check_inventory(json.loads(out), source)
        code, out, err = environment
        assert code == 0, err
        assert "env API_TOKEN (secret, from thread)" in out and "filesystem / " in out
        assert SECRET not in out
        code, out, err = environment_json
        assert code == 0, err
        check_environment(json.loads(out), source)
        if source == "live":
            await thread.terminate("done")
            await thread.result()
    code, _, err = await weft_cli(config, "thread", "tools", "no-such-thread")
    assert code == 1 and "no-such-thread" in err and "Traceback" not in err, err
