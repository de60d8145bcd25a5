"""`weft thread schedule-effect / effects / remove-effect` as real subprocesses."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import yaml
from effect_support import effect_definitions
from support import add_script, idle_after, start_thread, wait_until


async def _weft(config: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "weft"),
        "--config",
        str(config),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode or 0, out.decode(), err.decode()


async def test_effect_commands(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Schedule with --in and --args, list (table and JSON), remove; bad input exits
    non-zero with the reason."""
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker = await start_worker(effect_definitions(script))
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    handle = await start_thread(temporal_client, worker.task_queue)
    await wait_until(handle, idle_after(0))
    code, out, err = await _weft(config, "thread", "effects", handle.id)
    assert code == 0 and "no pending effects" in out, err
    code, out, err = await _weft(
        config,
        "thread",
        "schedule-effect",
        handle.id,
        "remind",
        "--args",
        '{"text": "hi"}',
        "--in",
        "1h",
    )
    assert code == 0, err
    effect_id, status = out.split()[:2]
    assert status == "scheduled,"
    code, out, _ = await _weft(config, "thread", "effects", handle.id)
    assert effect_id in out and "remind" in out and '{"text": "hi"}' in out
    code, out, _ = await _weft(config, "thread", "effects", handle.id, "--json")
    [listed] = json.loads(out)
    assert listed["id"] == effect_id and listed["scheduledBy"] == "update"
    code, out, err = await _weft(config, "thread", "schedule-effect", handle.id, "nope")
    assert code == 1 and "unknown effect 'nope'" in err
    code, out, err = await _weft(
        config, "thread", "schedule-effect", handle.id, "remind", "--in", "soon"
    )
    assert code == 2 and "unknown --in 'soon'" in err
    code, out, err = await _weft(
        config, "thread", "schedule-effect", handle.id, "remind", "--args", "[1]"
    )
    assert code == 2 and "--args must be a JSON object" in err
    code, out, err = await _weft(config, "thread", "remove-effect", handle.id, effect_id)
    assert code == 0 and f"removed {effect_id}" in out, err
    code, out, err = await _weft(config, "thread", "remove-effect", handle.id, effect_id)
    assert code == 1 and "no pending effect" in err
    assert (await _weft(config, "thread", "effects", handle.id, "--json"))[1].strip() == "[]"
    await handle.signal("terminate", {})
