"""Every generated thread id is `<agent>-<12 hex>`: a subagent's child thread's too."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import yaml
from subagent_support import family, start_boss, tool_result
from support import (
    add_script,
    assert_every_run_replays,
    idle_after,
    patch_markers,
    run_histories,
    wait_until,
    weft_cli,
)

from weft.contract.thread import WORKFLOW_TYPE
from weft.workflows.subagents.spawner import CHILD_ID_PATCH

BOUND = 30  # seconds visibility may take to list a thread


def _cli_config(tmp_path: Path, weft_config: Any, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": task_queue}
    path.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    return path


async def _listed_ids(config: Path, agent: str, expected: int) -> list[str]:
    """The ids `weft thread list --agent AGENT` shows, once visibility lists `expected`."""
    for _ in range(BOUND * 10):  # visibility is eventually consistent
        code, out, err = await weft_cli(config, "thread", "list", "--agent", agent)
        assert code == 0, err
        ids = [row.split("\t")[0] for row in out.splitlines() if row]
        if len(ids) >= expected:
            return ids
        await asyncio.sleep(0.1)
    raise AssertionError(f"`weft thread list --agent {agent}` never listed {expected} thread(s)")


async def test_a_subagent_thread_is_named_for_its_agent(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A child started by a subagent tool is `<agent>-<12 hex>` in the registry, in
    Temporal and in `weft thread list`; the parent's run asks the id patch in its first
    task and replays."""
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
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    assert tool_result(worker.store, handle.id, "researcher")["status"] == "success"
    [entry] = state.children
    child_id = entry["reference"]
    assert re.fullmatch(r"researcher-[0-9a-f]{12}", child_id), child_id

    described = await temporal_client.get_workflow_handle(child_id).describe()
    assert described.workflow_type == WORKFLOW_TYPE and described.id == child_id
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    assert await _listed_ids(config, "researcher", 1) == [child_id]

    [run] = await run_histories(temporal_client, handle.id, handle.first_execution_run_id or "")
    assert CHILD_ID_PATCH in [name for _, name in patch_markers(run)]
    await handle.signal("terminate", {})
    await handle.result()
    await assert_every_run_replays(temporal_client, handle)
