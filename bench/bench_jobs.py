"""Jobs: a batch of items against the scripted model, with and without a rate.

Run: `.venv/bin/python bench/bench_jobs.py [--items 10000] [--concurrency 50]
[--rate 3000rpm] [--window 10] [--items-per-run 200] [--postgres URL]`.

Starts a dev server, the scripted model and one in-process worker, creates one job of
`items` items (each a task: a thread asked `item N`, answered at once), and waits for it.
Prints items/s; with `--rate`, the most item starts in any window against the limit the
window allows; the job's workflow runs and the largest run's history (events and bytes);
the peak RSS of this process (worker, client and store).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import resource
import sys
import tempfile
import time
import uuid
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support import add_script, agent_definitions, local_stack, scratch_config  # noqa: E402
from temporalio.client import Client  # noqa: E402

from weft.client.jobs import Jobs  # noqa: E402
from weft.contract.jobs import JobRate, progress_line  # noqa: E402
from weft.workers.agent_worker import AgentWorker  # noqa: E402

SCRIPT = {"replies": [{"text": "done"}]}


async def _histories(client: Client, job_id: str) -> tuple[int, int, int]:
    """(runs, the most events in one run, the most bytes in one run) of the job."""
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{job_id}'")]
    events = size = 0
    for run in runs:
        history = await client.get_workflow_handle(job_id, run_id=run.run_id).fetch_history()
        events = max(events, len(history.events))
        size = max(size, len(history.to_json().encode()))
    return len(runs), events, size


def _peak_in_window(starts: list[float], window: float) -> int:
    """The most starts in any `window` seconds."""
    return max(
        (bisect.bisect_right(starts, s + window) - i for i, s in enumerate(starts)), default=0
    )


async def main(args: argparse.Namespace) -> None:
    async with local_stack() as (client, scripted, _address):
        with tempfile.TemporaryDirectory() as tmp:
            config = scratch_config(tmp, store_url=args.postgres)
            definitions = agent_definitions(add_script(scripted, SCRIPT), tools=[])
            async with AgentWorker(
                client,
                config,
                definitions=definitions,
                task_queue=f"jobs-{uuid.uuid4().hex[:8]}",
                scripted=scripted,
            ) as worker:
                assert worker.store is not None
                jobs = Jobs(client, worker.store, task_queue=worker.task_queue)
                rate = None
                if args.rate:
                    per_minute = int(args.rate.removesuffix("rpm"))
                    rate = JobRate(
                        key=f"bench-{uuid.uuid4().hex[:6]}",
                        requests_per_minute=per_minute,
                        window_seconds=args.window,
                    )
                items = [f"item {n}" for n in range(args.items)]
                began = time.perf_counter()
                job = await jobs.create(
                    "helper",
                    items,
                    concurrency=args.concurrency,
                    rate=rate,
                    items_per_run=args.items_per_run,
                )
                created = time.perf_counter() - began
                async for state in jobs.watch(job.job_id, every=5):
                    print(f"  {time.perf_counter() - began:7.1f}s {progress_line(state)}")
                elapsed = time.perf_counter() - began
                done = jobs.get(job.job_id)
                starts = sorted(
                    datetime.fromisoformat(e.timestamp).timestamp()
                    for e in worker.store.jobs.events(job.job_id, limit=10 * args.items + 100)
                    if e.type == "job.item.started"
                )
                runs, events, size = await _histories(client, job.job_id)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.items} items, concurrency {args.concurrency}, {args.items_per_run} items a "
        f"run, store {'postgres' if args.postgres else 'sqlite'}"
    )
    print(f"  job {done.status}: {done.counts.completed} completed, {done.counts.failed} failed")
    print(f"  created (items stored) in {created:.2f}s; all done in {elapsed:.1f}s")
    print(f"  throughput {args.items / elapsed:.1f} items/s")
    if rate is not None and rate.requests_per_minute is not None:
        allowed = max(1, int(rate.requests_per_minute * args.window / 60))
        peak = _peak_in_window(starts, args.window)
        span = (starts[-1] - starts[0]) or 1.0
        # The first window admits its whole allowance at once; the rate after it is the
        # one the limit holds. Starts are recorded once each task's workflow has started,
        # a little after its admission, so a window of them can show one more.
        steady = 60 * max(len(starts) - allowed, 0) / span
        print(
            f"  rate: at most {peak} recorded starts in any {args.window:g}s (limit {allowed}); "
            f"{steady:.0f}/min after the first window's burst, against "
            f"{rate.requests_per_minute}/min"
        )
    print(f"  JobRun runs: {runs}; largest run history {events} events, {size / 1024:.0f} KiB")
    print(f"  peak RSS of this process {peak_rss:.0f} MiB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rate", help="item starts per minute, e.g. 3000rpm")
    parser.add_argument("--window", type=float, default=10.0, help="the rate's window (s)")
    parser.add_argument("--items-per-run", type=int, default=200)
    parser.add_argument("--postgres", help="a PostgreSQL store URL instead of SQLite")
    asyncio.run(main(parser.parse_args()))
