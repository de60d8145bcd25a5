"""Load: many concurrent threads of tool steps on one in-process worker.

Run: `.venv/bin/python bench/bench_load.py [--threads 200] [--steps 10] [--store-url URL]`. Every thread runs
`steps` model steps (each with one tool call) and a final answer; the benchmark checks that
all complete and prints steps per second and the process's peak RSS (worker, scripted model
server and client share the process; the Temporal dev server is a separate process).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import (  # noqa: E402
    add_script,
    agent_definitions,
    idle_after,
    local_stack,
    scratch_config,
    start_thread,
    wait_until,
)

from weft.workers.agent_worker import AgentWorker  # noqa: E402


async def main(threads: int, steps: int, store_url: str | None) -> None:
    """Start `threads` threads at once and wait for all of them."""
    async with local_stack() as (client, scripted, address):
        script = add_script(
            scripted,
            {
                "replies": [
                    {
                        "tool_calls": [{"name": "note", "arguments": {"text": "load"}}],
                        "repeat": steps - 1,
                    },
                    {"text": "done"},
                ]
            },
        )
        with tempfile.TemporaryDirectory() as tmp_dir:
            tmp = Path(tmp_dir)
            config = scratch_config(tmp, store_url=store_url)
            async with AgentWorker(
                client,
                config,
                definitions=agent_definitions(script),
                task_queue=f"load-{uuid.uuid4().hex[:8]}",
                scripted=scripted,
            ) as worker:
                began = time.perf_counter()
                handles = await asyncio.gather(
                    *(
                        start_thread(
                            client,
                            worker.task_queue,
                            options={"maxTotalSteps": steps + 2},
                            messages=[{"role": "user", "content": "load"}],
                        )
                        for _ in range(threads)
                    )
                )
                states = await asyncio.gather(
                    *(wait_until(h, idle_after(1), timeout=1800, interval=2.0) for h in handles)
                )
                elapsed = time.perf_counter() - began
    total_steps = sum(s.counters.steps for s in states)
    complete = sum(1 for s in states if s.last_outcome == "done")
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"threads: {threads} x {steps} steps; completed {complete}/{threads}")
    print(f"wall time: {elapsed:.1f} s; {total_steps / elapsed:.1f} steps/s")
    print(f"peak RSS of the worker process: {rss_mb:.0f} MiB")
    if complete != threads:
        raise SystemExit("not every thread completed")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--store-url", help="default: a SQLite file in a temporary folder")
    args = parser.parse_args()
    asyncio.run(main(args.threads, args.steps, args.store_url))
