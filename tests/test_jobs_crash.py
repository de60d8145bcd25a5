"""A job whose worker is killed with SIGKILL mid-job finishes on another worker: no item
lost, none completed twice. On SQLite one worker is killed and a fresh one takes over; on
PostgreSQL two workers poll the queue and the one running an attempt is killed. Workers
are real `weft worker` subprocesses.

`WEFT_JOB_CRASH_ITEMS` sets the item count (small by default, to keep CI fast); run with
`WEFT_JOB_CRASH_ITEMS=1000 pytest -s tests/test_jobs_crash.py` for the full drill, whose
figures are printed (docs/jobs.md, Guarantees)."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from temporalio.client import Client
from worker_process import WorkerProcess

from weft.client.jobs import Jobs
from weft.contract.jobs import item_id_of
from weft.contract.tasks import ACTIVITY_TASK_ATTEMPT
from weft.store import Store
from weft.workers.dev_server import DevServer

ITEMS = int(os.environ.get("WEFT_JOB_CRASH_ITEMS", "8"))
# Enough slots to keep both workers busy, and runs short enough that the drill crosses
# continue-as-new boundaries at any size.
CONCURRENCY = max(3, ITEMS // 50)
ITEMS_PER_RUN = max(4, ITEMS // 5)
# Killed once this many items are done: mid-job at any size.
KILL_AFTER = max(2, ITEMS // 10)
# The full drill runs well past the default per-test timeout.
pytestmark = pytest.mark.timeout(120 + 2 * ITEMS)


def _definitions(root: Path) -> Path:
    """An agent on a scripted model answering `item N` with `answer N`, slowly enough
    (about a second an item) for the kill to land mid-answer."""
    files = {
        "agents/job_agent.yaml": {"sideA": {"prompt": "job_prompt"}},
        "prompts/job_prompt.yaml": {
            "toolDescription": "answers items",
            "model": "jobby",
            "prompt": "Answer the item.",
            "tools": [],
        },
        "models/jobby.yaml": {"provider": "scripted", "model": "jobs"},
        "scripts/jobs.yaml": {
            "jobs": {
                "turns": [
                    {
                        "match": f"regex:^item {n}$",
                        "replies": [
                            {"text": f"answer {n}", "chunk_size": 1, "chunk_delay_ms": 120}
                        ],
                    }
                    for n in range(ITEMS)
                ]
            }
        },
    }
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(content))
    return root


def _config(tmp_path: Path, address: str, store_url: str) -> tuple[Path, str]:
    """A worker config file on the job definitions, with its own task queue."""
    definitions = _definitions(tmp_path / "definitions")
    task_queue = f"jobs-crash-{tmp_path.name[-8:]}"
    config_file = tmp_path / "weft.yml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": address, "taskQueue": task_queue},
                "store": {"url": store_url},
                "definitions": str(definitions),
                "providers": {
                    "scripted": {"kind": "scripted", "scripts": str(definitions / "scripts")}
                },
                # A dead worker's sticky queue holds its workflows' next tasks this long.
                "worker": {"stickyScheduleToStartSeconds": 1},
            }
        )
    )
    return config_file, task_queue


async def _streaming_attempts(
    client: Client, jobs: Jobs, store: Store, job_id: str
) -> dict[str, str]:
    """Running items whose attempt thread is streaming its answer, by task id, each with
    the identity of the worker running its attempt activity (Temporal's fact): killing
    that worker loses the attempt mid-answer."""
    found: dict[str, str] = {}
    for item in jobs.items(job_id):
        task = store.tasks.get(item.task_id) if item.status == "running" else None
        attempt = task.current_attempt() if task else None
        if attempt is None or attempt.status != "running":
            continue
        types = {e.type for e in store.events.read(attempt.thread_id, limit=1000)}
        if "model.delta" not in types or "model.completed" in types:
            continue
        description = await client.get_workflow_handle(item.task_id).describe()
        for pending in description.raw_description.pending_activities:
            if pending.activity_type.name == ACTIVITY_TASK_ATTEMPT and (
                pending.last_worker_identity
            ):
                found[item.task_id] = str(pending.last_worker_identity)
    return found


@dataclass
class Drill:
    """What one drill measured."""

    seconds: float
    lost_attempts: int
    relaunches: int
    runs: int

    def report(self, store: str) -> str:
        return (
            f"{store}: {ITEMS} items in {self.seconds:.1f} s ({ITEMS / self.seconds:.1f} items/s),"
            f" {self.lost_attempts} lost attempts re-run, {self.relaunches} items relaunched,"
            f" {self.runs} runs of the job"
        )


async def _drill(
    client: Client,
    config_file: Path,
    task_queue: str,
    store_url: str,
    *,
    workers: int,
    replace: bool,
) -> Drill:
    """Run a job on `workers` workers, SIGKILL the one running an attempt mid-answer once
    `KILL_AFTER` items are done (starting a fresh worker if `replace`), and check that every
    item completed exactly once."""
    processes = [WorkerProcess(config_file) for _ in range(workers)]
    fresh = WorkerProcess(config_file)
    await asyncio.gather(*(p.start() for p in processes))
    store = Store.open(store_url)
    try:
        jobs = Jobs(client, store, task_queue=task_queue)
        began = time.monotonic()
        # A lost attempt is declared 3 s after its worker's last heartbeat.
        created = await jobs.create(
            "job_agent",
            [f"item {n}" for n in range(ITEMS)],
            concurrency=CONCURRENCY,
            items_per_run=ITEMS_PER_RUN,
            constraints={"lostAfterSeconds": 3},
        )
        job_id = created.job_id
        doomed: WorkerProcess | None = None
        victims: list[str] = []
        for _ in range(2400):
            if jobs.get(job_id).counts.completed >= KILL_AFTER:
                streaming = await _streaming_attempts(client, jobs, store, job_id)
                for worker in processes:
                    assert worker.process is not None
                    pid = f"{worker.process.pid}@"
                    victims = [t for t, who in streaming.items() if who.startswith(pid)]
                    if victims:
                        doomed = worker
                        break
                if doomed is not None:
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the job never had items done and an attempt mid-answer")
        assert jobs.get(job_id).counts.completed < ITEMS
        await doomed.kill()
        if replace:
            await fresh.start()
        done = await asyncio.wait_for(jobs.wait(job_id), timeout=150 + ITEMS)
        seconds = time.monotonic() - began
        failed = [(i.index, i.error) for i in jobs.items(job_id) if i.status != "completed"]
        assert done.status == "completed", failed
        assert done.counts.completed == done.counts.total == ITEMS
        assert done.counts.pending == done.counts.running == done.counts.failed == 0
        events = jobs.events(job_id)
        completions = Counter(
            e.to_wire()["jobItemId"] for e in events if e.type == "job.item.completed"
        )
        assert completions == Counter({item_id_of(job_id, n): 1 for n in range(ITEMS)})
        assert not [e for e in events if e.type == "job.item.failed"]
        lost_attempts = relaunches = 0
        items = list(jobs.items(job_id))
        assert sorted(i.index for i in items) == list(range(ITEMS))
        for item in items:
            assert item.output is not None and item.output.response == f"answer {item.index}"
            task = store.tasks.get(item.task_id)
            assert task is not None and task.status == "completed"
            # Attempts lost with the killed worker never completed; one attempt was accepted.
            statuses = [a.status for a in task.attempts]
            assert statuses[-1] == "completed" and set(statuses[:-1]) <= {"lost"}, statuses
            if item.task_id in victims:
                assert "lost" in statuses, (item.index, statuses)
            lost_attempts += len(statuses) - 1
            relaunches += item.launches - 1
            # The accepted thread answered once: one assistant message in its transcript.
            replies = store.messages.list(task.attempts[-1].thread_id)
            assert [m.role for m in replies] == ["user", "assistant"]
        runs = 1 + sum(1 for e in events if e.type == "job.progress")
        return Drill(seconds, lost_attempts, relaunches, runs)
    finally:
        store.close()
        for worker in [*processes, fresh]:
            await worker.stop()


async def test_sigkill_mid_job_loses_and_repeats_nothing(
    tmp_path: Path, dev_server: DevServer, temporal_client: Client
) -> None:
    """SQLite, one worker killed with items running: the job resumes on a fresh worker and
    every item completes exactly once; the attempt lost mid-answer never completed, and
    its item's task ran again."""
    store_url = f"sqlite:///{tmp_path / 'weft.db'}"
    config_file, task_queue = _config(tmp_path, dev_server.address, store_url)
    drill = await _drill(
        temporal_client, config_file, task_queue, store_url, workers=1, replace=True
    )
    assert drill.lost_attempts >= 1
    print(drill.report("SQLite, 1 worker killed, 1 fresh"))


async def test_two_workers_on_postgres_one_killed_mid_job(
    tmp_path: Path,
    dev_server: DevServer,
    temporal_client: Client,
    postgres_databases: Callable[[], str],
) -> None:
    """PostgreSQL, two workers on one queue: the one running an attempt mid-answer is
    killed, the other finishes the job alone; every item completes exactly once."""
    store_url = postgres_databases()
    config_file, task_queue = _config(tmp_path, dev_server.address, store_url)
    drill = await _drill(
        temporal_client, config_file, task_queue, store_url, workers=2, replace=False
    )
    assert drill.lost_attempts >= 1
    print(drill.report("PostgreSQL, 2 workers, 1 killed"))
