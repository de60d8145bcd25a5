"""Records the histories that tests/test_replay.py replays: `python tests/record_histories.py`
(and the `TaskRun` histories of tests/histories/tasks/, which tests/test_replay_tasks.py replays).

Run it after a deliberate, versioned change to the workflow (with `workflow.patched`), and
commit the new files next to the old ones: old histories must keep replaying. Name
scenarios to record only those (`python tests/record_histories.py hitl_permission_timeout`).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scenarios import DRIVERS, IDLE_CONTINUED, LONG_THREAD, SUBAGENTS, Probe  # noqa: E402
from support import local_stack, run_histories, scratch_config  # noqa: E402
from task_scenarios import (  # noqa: E402
    TASK_COMMANDS,
    TASK_TEMPORAL_CANCEL,
    drive_task_commands,
    drive_task_temporal_cancel,
)


async def record(out: Path, only: set[str]) -> None:
    """Run each scenario (or those in `only`) on a fresh dev server; write histories as JSON."""
    async with local_stack() as (client, scripted, address):
        for name, drive in DRIVERS.items():
            if not only or name in only:
                await drive(client, scripted, _config(address), _recorder(client, name, out))
        for name, drive_tasks in TASK_DRIVERS.items():
            if not only or name in only:
                await _record_tasks(client, scripted, address, out / "tasks", drive_tasks)


async def _record_tasks(client: Any, scripted: Any, address: str, out: Path, drive: Any) -> None:
    """A task scenario's `TaskRun` histories (each task ran once: one run each)."""
    recorded = await drive(client, scripted, _config(address), "record")
    out.mkdir(exist_ok=True)
    for name, task_id in recorded.items():
        history = await client.get_workflow_handle(task_id).fetch_history()
        (out / f"{name}.json").write_text(history.to_json())
        print(f"recorded {name}: {len(history.events)} events")


# The task scenarios, by the name that records them.
TASK_DRIVERS = {
    TASK_COMMANDS: drive_task_commands,
    TASK_TEMPORAL_CANCEL: drive_task_temporal_cancel,
}


def _config(address: str) -> Any:
    """A scratch config (its own SQLite store) on the recording dev server."""
    config = scratch_config(Path(f"/tmp/weft-record-{uuid.uuid4().hex[:8]}"))
    config.temporal.address = address
    return config


def _recorder(client: Any, name: str, out: Path) -> Probe:
    """A probe that writes the closed thread's history (every run's, a subagent's) to `out`."""

    async def closed(worker: Any, handle: Any, extra: dict[str, Any]) -> None:
        if name in (LONG_THREAD, IDLE_CONTINUED):  # every run
            runs = await run_histories(client, handle.id, extra["first_run_id"])
            for i, history in enumerate(runs, start=1):
                (out / f"{name}_run{i}.json").write_text(history.to_json())
                print(f"recorded {name} run {i}: {len(history.events)} events")
            return
        recorded = {"": handle}
        if name == SUBAGENTS:
            first_child = extra["child"]
            await first_child.result()
            recorded = {"_parent": handle, "_child": first_child}
        for suffix, each in recorded.items():
            history = await each.fetch_history()
            (out / f"{name}{suffix}.json").write_text(history.to_json())
            print(f"recorded {name}{suffix}: {len(history.events)} events")

    return Probe(queue="record", closed=closed)


if __name__ == "__main__":
    asyncio.run(record(HERE / "histories", set(sys.argv[1:])))
