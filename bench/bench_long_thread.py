"""A 2,000-step thread across continue-as-new: every run stays under 10,000 events and 5 MB.

Run: `.venv/bin/python bench/bench_long_thread.py [--steps N]`. One turn of N steps (a model
call returning a note tool call, then the tool) with the default thresholds
(`continueAsNewEvents` 4,000, `continueAsNewBytes` 4 MiB). Prints the number of runs and the
largest run's event count and history bytes (JSON), and fails if a run broke the bounds.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

from google.protobuf.json_format import MessageToJson
from temporalio.api.history.v1 import History

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import (  # noqa: E402
    add_script,
    agent_definitions,
    local_stack,
    run_histories,
    scratch_config,
    start_thread,
    store_of,
    wait_until,
)

from weft.workers.agent_worker import AgentWorker  # noqa: E402

MAX_EVENTS = 10_000
MAX_BYTES = 5 * 1024 * 1024


async def main(steps: int) -> None:
    """Run one long thread and print the per-run figures."""
    async with local_stack() as (client, scripted, address):
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            config = scratch_config(tmp)
            note = {"name": "note", "arguments": {"text": "a long-thread note"}}
            script = {"replies": [{"tool_calls": [note], "repeat": steps}, {"text": "done"}]}
            model = add_script(scripted, script)
            async with AgentWorker(
                client,
                config,
                definitions=agent_definitions(model),
                task_queue=f"long-{uuid.uuid4().hex[:8]}",
                scripted=scripted,
            ) as worker:
                began = time.perf_counter()
                started = await start_thread(
                    client,
                    worker.task_queue,
                    options={"maxTotalSteps": steps + 1},
                    messages=[{"role": "user", "content": "take notes"}],
                )
                handle = client.get_workflow_handle(started.id)
                state = await wait_until(
                    handle,
                    lambda s: s.status == "waiting_input" and s.counters.turns >= 1,
                    timeout=3600,
                    interval=1.0,
                )
                elapsed = time.perf_counter() - began
                runs = await run_histories(client, started.id, started.first_execution_run_id)
                positions = [m.position for m in store_of(worker).messages.list(started.id)]
                await handle.signal("terminate", {})
    events = [len(r.events) for r in runs]
    sizes = [len(MessageToJson(History(events=r.events)).encode()) for r in runs]
    print(f"steps: {state.counters.steps} in {elapsed:.0f} s; messages stored: {len(positions)}")
    print(f"runs: {len(runs)} (thread_read counters.runs {state.counters.runs})")
    print(f"max events per run: {max(events)} (bound {MAX_EVENTS})")
    print(f"max history bytes per run (JSON): {max(sizes)} (bound {MAX_BYTES})")
    assert positions == list(range(len(positions))), "message positions are not contiguous"
    assert max(events) < MAX_EVENTS and max(sizes) < MAX_BYTES


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=2000)
    asyncio.run(main(parser.parse_args().steps))
