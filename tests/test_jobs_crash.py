"""A job whose worker is killed with SIGKILL mid-job finishes on a fresh worker: no item
lost, none completed twice. Workers are real `weft worker` subprocesses."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import yaml
from temporalio.client import Client
from worker_process import WorkerProcess

from weft.client.jobs import Jobs
from weft.contract.jobs import item_id_of
from weft.store import Store
from weft.workers.dev_server import DevServer

ITEMS = 12


def _definitions(root: Path) -> Path:
    """An agent on a scripted model answering `item N` with `answer N`, slowly enough
    (about a second an item) for the kill to land mid-job."""
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


def _mid_stream(jobs: Jobs, store: Store, job_id: str) -> bool:
    """Whether a running item's attempt thread is streaming its answer (its attempt's
    activity is then waiting on the worker about to be killed)."""
    for item in jobs.items(job_id):
        task = store.tasks.get(item.task_id) if item.status == "running" else None
        attempt = task.current_attempt() if task else None
        if attempt is not None and attempt.status == "running":
            types = {e.type for e in store.events.read(attempt.thread_id, limit=1000)}
            if "model.delta" in types and "model.completed" not in types:
                return True
    return False


async def test_sigkill_mid_job_loses_and_repeats_nothing(
    tmp_path: Path, dev_server: DevServer, temporal_client: Client
) -> None:
    """Killed with items running, the job resumes on a second worker and every item
    completes exactly once; an attempt lost with the killed worker never completed, and
    its item's task ran again."""
    definitions = _definitions(tmp_path / "definitions")
    store_url = f"sqlite:///{tmp_path / 'weft.db'}"
    task_queue = f"jobs-crash-{tmp_path.name[-8:]}"
    config_file = tmp_path / "weft.yml"
    config_file.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": dev_server.address, "taskQueue": task_queue},
                "store": {"url": store_url},
                "definitions": str(definitions),
                "providers": {
                    "scripted": {"kind": "scripted", "scripts": str(definitions / "scripts")}
                },
            }
        )
    )
    first, second = WorkerProcess(config_file), WorkerProcess(config_file)
    await first.start()
    store = Store.open(store_url)
    try:
        jobs = Jobs(temporal_client, store, task_queue=task_queue)
        items = [f"item {n}" for n in range(ITEMS)]
        # A lost attempt is declared 3 s after its worker's last heartbeat.
        created = await jobs.create(
            "job_agent",
            items,
            concurrency=3,
            items_per_run=5,
            constraints={"lostAfterSeconds": 3},
        )
        job_id = created.job_id
        for _ in range(1200):
            if jobs.get(job_id).counts.completed >= 2 and _mid_stream(jobs, store, job_id):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the job never had items done and an answer mid-stream")
        await first.kill()
        await second.start()
        done = await asyncio.wait_for(jobs.wait(job_id), timeout=150)
        failed = [(i.index, i.error) for i in jobs.items(job_id) if i.status != "completed"]
        assert done.status == "completed", failed
        assert done.counts.completed == ITEMS
        events = jobs.events(job_id)
        completions = Counter(
            e.to_wire()["jobItemId"] for e in events if e.type == "job.item.completed"
        )
        assert completions == Counter({item_id_of(job_id, n): 1 for n in range(ITEMS)})
        lost_attempts = 0
        for item in jobs.items(job_id):
            assert item.output is not None and item.output.response == f"answer {item.index}"
            task = store.tasks.get(item.task_id)
            assert task is not None
            # Attempts lost with the killed worker never completed; one attempt did.
            statuses = [a.status for a in task.attempts]
            assert statuses[-1] == "completed" and set(statuses[:-1]) <= {"lost"}, statuses
            lost_attempts += len(statuses) - 1
            # The completing thread answered once: one assistant message in its transcript.
            replies = store.messages.list(task.attempts[-1].thread_id)
            assert [m.role for m in replies] == ["user", "assistant"]
        # The attempt killed mid-answer was lost, and its item's task ran again.
        assert lost_attempts >= 1
    finally:
        store.close()
        await first.stop()
        await second.stop()
