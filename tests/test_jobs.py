"""Jobs on the dev server with the scripted model: items run as tasks at most `concurrency`
at once, the `job.*` events and results, continue-as-new, cancel and resume, bad items
files refused naming the line, the HTTP routes, and the store's idempotent item ends."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_support import api_stack
from support import (
    StartWorker,
    add_script,
    agent_definitions,
    event_schema_validator,
    store_of,
    until,
    weft_cli,
)
from temporalio.client import Client
from temporalio.worker import Replayer

from weft.api.idempotency import REPLAYED_HEADER
from weft.client.jobs import JobError, Jobs, parse_rate, read_items, read_items_file
from weft.contract.events import Event
from weft.contract.jobs import JobItem, JobRecord, item_id_of, item_task_id
from weft.store import Store
from weft.transport.codec import data_converter
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.workflow_runner import workflow_runner
from weft.workflows.jobs.job_run import JobRunWorkflow


def numbered_script(count: int, **reply: Any) -> dict[str, Any]:
    """A script answering `item N` with `answer N` (so each result is its own item's)."""
    return {
        "turns": [
            {"match": f"regex:^item {n}$", "replies": [{"text": f"answer {n}", **reply}]}
            for n in range(count)
        ]
    }


def numbered_items(count: int) -> list[dict[str, Any]]:
    return [{"input": f"item {n}", "key": f"k{n}"} for n in range(count)]


async def _jobs(
    start_worker: StartWorker, client: Client, server: ScriptedModelServer, script: dict[str, Any]
) -> tuple[Jobs, str]:
    name = add_script(server, script)
    worker = await start_worker(agent_definitions(name))
    return Jobs(client, store_of(worker), task_queue=worker.task_queue), name


async def _ended(jobs: Jobs, job_id: str, timeout: float = 60) -> JobRecord:
    return await asyncio.wait_for(jobs.wait(job_id), timeout=timeout)


def _log(jobs: Jobs, job_id: str) -> list[Event]:
    """The job's log, each event checked against the vendored schema."""
    validator = event_schema_validator()
    events = jobs.events(job_id)
    for event in events:
        wire = event.to_wire()
        validator.validate(wire)
        assert wire["jobId"] == job_id and wire["status"]
    return events


def _assert_each_item_once(jobs: Jobs, job_id: str, count: int) -> list[JobItem]:
    """Every item completed with its own answer, one completion each, by one attempt."""
    events = _log(jobs, job_id)
    completions = Counter(
        e.to_wire()["jobItemId"] for e in events if e.type == "job.item.completed"
    )
    assert completions == Counter({item_id_of(job_id, n): 1 for n in range(count)})
    items = list(jobs.items(job_id))
    assert [i.index for i in items] == list(range(count))
    for item in items:
        assert item.status == "completed" and item.output is not None, item
        assert item.output.response == f"answer {item.index}"
        task = jobs._store.tasks.get(item.task_id)
        assert task is not None and task.status == "completed"
        assert [a.status for a in task.attempts] == ["completed"]
    return items


def _peak_running(events: list[Event]) -> int:
    """The most items running at once, as the job's log tells it."""
    running = peak = 0
    for event in events:
        if event.type == "job.item.started":
            running += 1
        elif event.type in ("job.item.completed", "job.item.failed"):
            running -= 1
        peak = max(peak, running)
    return peak


async def _runs_replay(client: Client, job_id: str) -> int:
    """Every run of the job's workflow replays on today's code; how many runs there were."""
    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[JobRunWorkflow],
        data_converter=data_converter(None),
        workflow_runner=workflow_runner(data_converter(None)),
    )
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{job_id}'")]
    for run in runs:
        history = await client.get_workflow_handle(job_id, run_id=run.run_id).fetch_history()
        await replayer.replay_workflow(history)
    return len(runs)


async def _job_of(count: int, jobs: Jobs, client: Client) -> JobRecord:
    created = await jobs.create("helper", numbered_items(count), concurrency=3)
    assert created.counts.total == count and created.status in ("accepted", "running")
    done = await _ended(jobs, created.job_id)
    assert done.status == "completed", done
    assert done.counts.completed == count and done.counts.pending == done.counts.running == 0
    _assert_each_item_once(jobs, created.job_id, count)
    events = _log(jobs, created.job_id)
    types = [e.type for e in events]
    assert types[:2] == ["job.created", "job.started"] and types[-1] == "job.completed"
    assert types.count("job.item.started") == count
    assert 1 < _peak_running(events) <= 3
    lines = [json.loads(line) for line in jobs.results(created.job_id)]
    assert [(r["index"], r["key"], r["status"], r["output"]) for r in lines] == [
        (n, f"k{n}", "completed", f"answer {n}") for n in range(count)
    ]
    assert await _runs_replay(client, created.job_id) == 1
    return done


async def test_job_of_twenty_items_completes(start_worker, temporal_client, scripted_server):
    """Twenty items run three at a time, each as a task completed by one attempt; the log
    validates, results are one JSON line per item in order, and the run replays."""
    jobs, _ = await _jobs(start_worker, temporal_client, scripted_server, numbered_script(20))
    done = await _job_of(20, jobs, temporal_client)
    assert (done.status, done.counts.completed) == ("completed", 20)


async def test_job_on_postgres(
    start_worker, temporal_client, scripted_server, weft_config, postgres_databases
):
    """The same job (of twelve items) on the PostgreSQL store."""
    weft_config.store.url = postgres_databases()
    jobs, _ = await _jobs(start_worker, temporal_client, scripted_server, numbered_script(12))
    assert jobs._store.engine.dialect.name == "postgresql"
    done = await _job_of(12, jobs, temporal_client)
    assert (done.status, done.counts.completed) == ("completed", 12)


async def test_job_continues_as_new_and_runs_each_item_once(
    start_worker, temporal_client, scripted_server
):
    """With three items a run, eight items take several runs; each run drains before it
    continues as new, and every item still completes exactly once."""
    jobs, _ = await _jobs(start_worker, temporal_client, scripted_server, numbered_script(8))
    created = await jobs.create("helper", numbered_items(8), concurrency=2, items_per_run=3)
    done = await _ended(jobs, created.job_id)
    assert done.status == "completed" and done.counts.completed == 8
    _assert_each_item_once(jobs, created.job_id, 8)
    types = [e.type for e in _log(jobs, created.job_id)]
    assert types.count("job.started") == 1 and types.count("job.progress") == 2
    assert await _runs_replay(temporal_client, created.job_id) == 3


async def test_cancel_then_resume(start_worker, temporal_client, scripted_server):
    """Cancel stops launching and cancels the running items' tasks; the rest stay pending.
    A resume runs every item that did not complete, and the job completes."""
    jobs, name = await _jobs(
        start_worker, temporal_client, scripted_server, numbered_script(5, delay_ms=60_000)
    )
    created = await jobs.create("helper", numbered_items(5), concurrency=2)
    job_id = created.job_id
    await until(lambda: jobs.get(job_id).counts.running == 2, "two items run")
    await jobs.cancel(job_id, "enough")
    cancelled = await _ended(jobs, job_id)
    assert cancelled.status == "cancelled" and cancelled.reason == "enough"
    counts = cancelled.counts
    assert (counts.cancelled, counts.pending, counts.running, counts.completed) == (2, 3, 0, 0)
    first_two = [i for i in jobs.items(job_id) if i.status == "cancelled"]
    for item in first_two:
        task = jobs._store.tasks.get(item.task_id)
        assert task is not None and task.status == "cancelled"
    with pytest.raises(JobError, match="is cancelled"):
        await jobs.cancel(job_id)
    scripted_server.set_script(name, numbered_script(5))  # answers at once from now on
    await jobs.resume(job_id, "go on")
    done = await _ended(jobs, job_id)
    assert done.status == "completed" and done.counts.completed == 5
    events = _log(jobs, job_id)
    assert Counter(e.type for e in events)["job.item.completed"] == 5
    for item in jobs.items(job_id):
        assert item.output is not None and item.output.response == f"answer {item.index}"
    resumed = [e for e in events if e.type == "job.started" and e.payload.get("resumed")]
    assert len(resumed) == 1 and resumed[0].payload["reason"] == "go on"
    retried = jobs._store.tasks.get(first_two[0].task_id)
    assert retried is not None and [a.status for a in retried.attempts] == [
        "cancelled",
        "completed",
    ]
    with pytest.raises(JobError, match="only a cancelled or failed job"):
        await jobs.resume(job_id)


async def test_failed_items_fail_the_job_with_results(
    start_worker, temporal_client, scripted_server
):
    """Items whose answers miss the acceptance schema fail (after their attempts); the job
    ends failed naming how many, and the results carry each item's error."""
    schema = {"type": "object", "required": ["n"]}
    script = {
        "turns": [
            {"match": "good", "replies": [{"text": '{"n": 1}'}]},
            {"match": "*", "replies": [{"text": "not json"}]},
        ]
    }
    jobs, _ = await _jobs(start_worker, temporal_client, scripted_server, script)
    created = await jobs.create(
        "helper",
        ["good 1", "bad", "good 2"],
        acceptance_schema=schema,
        constraints={"maxAttempts": 2},
    )
    done = await _ended(jobs, created.job_id)
    assert done.status == "failed" and done.reason == "1 failed of 3 items"
    lines = [json.loads(line) for line in jobs.results(created.job_id)]
    assert [r["status"] for r in lines] == ["completed", "failed", "completed"]
    assert lines[0]["structured"] == {"n": 1} and lines[1]["attempts"] == 2
    assert "not JSON" in lines[1]["error"]


async def test_rate_paces_item_starts(start_worker, temporal_client, scripted_server):
    """With a rate of two starts a second, six items free to run at once start two by
    two, each pair a window after the one before."""
    jobs, _ = await _jobs(start_worker, temporal_client, scripted_server, numbered_script(6))
    rate = {"key": "paced", "requestsPerMinute": 120, "windowSeconds": 1}
    created = await jobs.create("helper", numbered_items(6), concurrency=6, rate=rate)
    done = await _ended(jobs, created.job_id)
    assert done.status == "completed" and done.rate is not None
    starts = sorted(
        datetime.fromisoformat(e.timestamp)
        for e in _log(jobs, created.job_id)
        if e.type == "job.item.started"
    )
    assert len(starts) == 6
    gaps = [
        (later - earlier).total_seconds()
        for earlier, later in zip(starts, starts[2:], strict=False)
    ]
    assert min(gaps) >= 0.9, gaps


def test_bad_items_are_refused_naming_the_line(tmp_path: Path) -> None:
    """Each kind of bad line is refused with its line number and what is wrong."""
    cases = {
        '"ok"\n{"input": ""}\n': r"line 2: field 'input'",
        '"ok"\n\n{nope\n': r"line 3: not JSON",
        '{"input": "a", "key": "x"}\n{"input": "b", "key": "x"}\n': r"line 2: key 'x' is also on line 1",
        "[1, 2]\n": r"line 1: an item is a JSON string or an object",
        '{"input": "a", "extra": 1}\n': r"line 1: field 'extra'",
        "\n\n": r"no items",
    }
    for text, message in cases.items():
        with pytest.raises(JobError, match=message):
            read_items(text.splitlines(), "items.jsonl")
    with pytest.raises(JobError, match="missing.jsonl"):
        read_items_file(tmp_path / "missing.jsonl")
    with pytest.raises(JobError, match="rate: rate limit 'fast'"):
        parse_rate("openai=fast")
    with pytest.raises(JobError, match="write KEY=LIMITS"):
        parse_rate("500rpm")
    assert parse_rate("openai=500rpm,2000tpm").tokens_per_minute == 2000
    items = read_items(['"plain"', '{"input": "x", "metadata": {"a": 1}}'])
    assert [i.input for i in items] == ["plain", "x"] and items[1].metadata == {"a": 1}


async def test_cli_run_status_results_and_refusals(
    start_worker, scripted_server, weft_config, tmp_path
):
    """`weft job run --wait` prints progress lines to the end; status and results read
    it; a bad line is refused before anything is stored, naming the file and line."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, numbered_script(4))))
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps(i) + "\n" for i in numbered_items(4)))
    code, out, err = await weft_cli(
        config, "job", "run", "helper", "--items", str(items), "--concurrency", "2", "--wait"
    )
    assert code == 0, err
    job_id, *progress = out.splitlines()
    assert progress[-1].startswith(f"{job_id} completed: 4/4 done (4 completed")
    code, out, err = await weft_cli(config, "job", "results", job_id)
    assert code == 0, err
    assert [json.loads(line)["output"] for line in out.splitlines()] == [
        f"answer {n}" for n in range(4)
    ]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('"fine"\n"fine"\n{"input": 3}\n')
    code, out, err = await weft_cli(config, "job", "run", "helper", "--items", str(bad))
    assert code == 1 and err.startswith(f"weft: {bad} line 3: field 'input'"), err
    assert [j.job_id for j in store_of(worker).jobs.list()] == [job_id]
    code, out, err = await weft_cli(config, "job", "list", "--status", "completed")
    assert code == 0 and out.startswith(f"{job_id} completed: 4/4 done"), err


async def test_http_routes(start_worker, temporal_client, weft_config, scripted_server):
    """POST /jobs creates and starts a job; GET reads it; results are JSON Lines; a bad
    item is 422 naming it; cancel of an ended job is 409."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, numbered_script(3))))
    async with api_stack(temporal_client, weft_config, worker.task_queue) as stack:
        bad = await stack.http.post(
            "/jobs", json={"assignee": "helper", "items": ["item 0", {"input": ""}]}
        )
        assert bad.status_code == 422 and "items[1]" in bad.text, bad.text
        body = {"assignee": "helper", "items": ["item 0", "item 1", "item 2"], "rate": "k=600rpm"}
        key = {"Idempotency-Key": "job-once"}
        reply = await stack.http.post("/jobs", json=body, headers=key)
        assert reply.status_code == 201, reply.text
        again = await stack.http.post("/jobs", json=body, headers=key)
        assert again.headers[REPLAYED_HEADER] == "true"
        assert again.json()["jobId"] == reply.json()["jobId"]
        job = reply.json()
        assert job["rate"]["key"] == "k" and job["rate"]["requestsPerMinute"] == 600
        job_id = job["jobId"]
        await until(
            lambda: (r := stack.store.jobs.get(job_id)) is not None and r.terminal,
            "the job ends",
            timeout=60,
        )
        read = await stack.http.get(f"/jobs/{job_id}")
        assert read.status_code == 200 and read.json()["status"] == "completed"
        results = await stack.http.get(f"/jobs/{job_id}/results")
        assert results.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in results.text.splitlines()]
        assert [r["output"] for r in lines] == ["answer 0", "answer 1", "answer 2"]
        refused = await stack.http.post(f"/jobs/{job_id}/cancel")
        assert refused.status_code == 409 and "is completed" in refused.text
        listed = await stack.http.get("/jobs", params={"status": "completed"})
        assert [j["jobId"] for j in listed.json()] == [job_id]
        missing = await stack.http.get("/jobs/job-000000000000")
        assert missing.status_code == 404 and "no job 'job-000000000000'" in missing.text


# ---- the store, on both backends ----------------------------------------------------

AT = "2026-11-27T10:00:00.000Z"


@pytest.fixture(params=["sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_databases: Callable[[], str]
) -> Iterator[Store]:
    url = f"sqlite:///{tmp_path / 'jobs.db'}" if request.param == "sqlite" else postgres_databases()
    opened = Store.open(url)
    try:
        yield opened
    finally:
        opened.close()


def _job_event(job_id: str, kind: str, event_id: str, payload: dict[str, Any]) -> Event:
    return Event.model_validate(
        {
            "type": kind,
            "eventId": event_id,
            "timestamp": AT,
            "threadId": job_id,
            "jobId": job_id,
            "payload": payload,
        }
    )


def test_store_folds_item_ends_once(store: Store) -> None:
    """An item's completion is stored and counted once, however often it is written; an
    end for an item already completed changes nothing; counts equal the rows."""
    job_id = "job-aaaaaaaaaaaa"
    record = JobRecord(
        job_id=job_id,
        assignee="helper",
        created_at=AT,
        updated_at=AT,
        counts={"total": 2, "pending": 2},
    )
    items = [
        JobItem(
            item_id=item_id_of(job_id, n),
            job_id=job_id,
            index=n,
            task_id=item_task_id(job_id, n),
            input=f"item {n}",
        )
        for n in range(2)
    ]
    created = _job_event(job_id, "job.created", "c", {"job": record.model_dump(mode="json")})
    store.jobs.create(record, items, created)
    with pytest.raises(ValueError, match="exists already"):
        store.jobs.create(record, items, created)
    item = {"itemId": items[0].item_id, "index": 0, "taskId": items[0].task_id}
    started = _job_event(job_id, "job.item.started", "s0", {"jobItem": item})
    output = {"threadId": "t", "response": "done"}
    completed = _job_event(
        job_id,
        "job.item.completed",
        f"{items[0].item_id}:completed",
        {"jobItem": {**item, "status": "completed", "attempts": 1, "output": output}},
    )
    store.jobs.record([started, completed])
    assert store.jobs.record([started, completed]) == []  # stored once
    late_failure = _job_event(
        job_id,
        "job.item.failed",
        "f0",
        {"jobItem": {**item, "status": "failed", "error": "late"}},
    )
    store.jobs.record([late_failure])
    job = store.jobs.get(job_id)
    assert job is not None
    assert (job.counts.completed, job.counts.pending, job.counts.failed) == (1, 1, 0)
    assert job.counts == store.jobs.recount(job_id)
    first = store.jobs.item(job_id, 0)
    assert first is not None and first.status == "completed" and first.launches == 1
    assert first.output is not None and first.output.response == "done" and first.error is None
    assert [i.index for i in store.jobs.pending(job_id, 0, 10)] == [1]
    assert [e.type for e in store.jobs.events(job_id)] == [
        "job.created",
        "job.item.started",
        "job.item.completed",
        "job.item.failed",
    ]


def test_a_recorded_end_never_ends_a_resumed_run(store: Store) -> None:
    """A reader's recorded end of run r1 (closed through Temporal) is refused once a
    resume's run r2 has written after r1's own end; stored while r1 wrote last."""
    job_id = "job-bbbbbbbbbbbb"
    record = JobRecord(job_id=job_id, assignee="helper", created_at=AT, updated_at=AT)
    created = _job_event(job_id, "job.created", "c", {"job": record.model_dump(mode="json")})
    store.jobs.create(record, [], created)

    def by_run(kind: str, event_id: str, run_id: str, **payload: Any) -> Event:
        return _job_event(job_id, kind, event_id, payload).model_copy(update={"run_id": run_id})

    closed_r1 = by_run("job.failed", f"{job_id}:r1:closed", "r1", reason="terminated")
    store.jobs.record([by_run("job.started", "s1", "r1")])
    store.jobs.record([by_run("job.failed", "f1", "r1", reason="an item failed")])
    store.jobs.record([by_run("job.started", "s2", "r2", resumed=True)])
    assert store.jobs.record_end(closed_r1) is False
    job = store.jobs.get(job_id)
    assert job is not None and job.status == "running"
    closed_r2 = by_run("job.failed", f"{job_id}:r2:closed", "r2", reason="terminated")
    assert store.jobs.record_end(closed_r2) is True
    job = store.jobs.get(job_id)
    assert job is not None and job.status == "failed" and job.reason == "terminated"
