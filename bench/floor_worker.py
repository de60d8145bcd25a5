"""A floor worker process (bench/floor.py), for the load benchmark's side-by-side runs.

Run: `.venv/bin/python bench/floor_worker.py --address HOST:PORT --task-queue Q --model-url URL`.
It prints a line with "polling" once it polls, and stops on SIGTERM or SIGINT. The floor
lives in its own module, not here: the sandbox cannot re-import a workflow from __main__.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from floor import floor_worker
from scenario import add_tool, bench_definitions

from weft.transport.connection import connect


async def serve(address: str, task_queue: str, base_url: str) -> None:
    """Run a floor worker until SIGTERM or SIGINT."""
    client = await connect(address)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with floor_worker(client, task_queue, base_url, add_tool(bench_definitions())):
        print(f"floor worker: polling {task_queue} on {address}", flush=True)
        await stop.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--address", required=True)
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--model-url", required=True, help="the scripted server's OpenAI base URL")
    args = parser.parse_args()
    asyncio.run(serve(args.address, args.task_queue, args.model_url))
