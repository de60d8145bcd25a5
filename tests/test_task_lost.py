"""`lost`: the worker running a task's attempt is SIGKILLed (a real `weft worker`
subprocess); Temporal times the attempt's heartbeat out, the task records `task.lost` for
that attempt, and its next attempt completes on the other worker."""

from __future__ import annotations

import asyncio

import yaml
from support import event_schema_validator
from temporalio.client import WorkflowExecutionStatus
from worker_process import WorkerProcess, worker_config

from weft.client.tasks import Tasks
from weft.store import Store


async def _attempt_worker(tasks: Tasks, task_id: str) -> str:
    """The identity of the worker running the task's attempt activity (Temporal's fact)."""

    async def running_on() -> str | None:
        description = await tasks._client.get_workflow_handle(task_id).describe()
        for pending in description.raw_description.pending_activities:
            if pending.activity_type.name == "task.attempt" and pending.last_worker_identity:
                return str(pending.last_worker_identity)
        return None

    for _ in range(400):
        if identity := await running_on():
            return identity
        await asyncio.sleep(0.05)
    raise AssertionError("the attempt activity never started on a worker")


async def test_killed_attempt_worker_makes_the_task_lost_then_retried(
    tmp_path, dev_server, temporal_client
):
    config_file = worker_config(tmp_path, dev_server.address)
    config = yaml.safe_load(config_file.read_text())
    # A dead worker's sticky queue holds the task's next workflow task this long.
    config["worker"] = {"stickyScheduleToStartSeconds": 1}
    config_file.write_text(yaml.safe_dump(config))
    workers = [WorkerProcess(config_file), WorkerProcess(config_file)]
    await asyncio.gather(*(w.start() for w in workers))
    store = Store.open(config["store"]["url"])
    try:
        tasks = Tasks(temporal_client, store, task_queue=config["temporal"]["taskQueue"])
        created = await tasks.create(
            "slow tool please",
            "crash_agent",
            constraints={"maxAttempts": 2, "lostAfterSeconds": 2},
        )
        identity = await _attempt_worker(tasks, created.task_id)
        [doomed] = [w for w in workers if w.process and identity.startswith(f"{w.process.pid}@")]
        await doomed.kill()

        done = await asyncio.wait_for(tasks.wait(created.task_id), timeout=60)
        assert done.status == "completed", done
        first, second = done.attempts
        assert first.status == "lost" and identity in (first.error or "")
        assert second.status == "completed" and second.thread_id != first.thread_id
        events = [e.to_wire() for e in tasks.events(created.task_id)]
        validator = event_schema_validator()
        for event in events:
            validator.validate(event)
        types = [e["type"] for e in events]
        lost_at = types.index("task.lost")
        assert types[lost_at - 1 : lost_at + 3] == [
            "task.attempt.failed",
            "task.lost",
            "task.retrying",
            "task.attempt.started",
        ]
        lost = events[lost_at]
        assert lost["worker"] == {"identity": identity} and lost["status"] == "lost"
        assert lost["attemptId"] == first.attempt_id
        assert store.tasks.rebuild(created.task_id) == store.tasks.get(created.task_id)
        # The lost attempt's thread was closed by the task (the soft terminate).
        thread = temporal_client.get_workflow_handle(first.thread_id)
        await asyncio.wait_for(thread.result(), timeout=30)
        assert (await thread.describe()).status == WorkflowExecutionStatus.COMPLETED
    finally:
        store.close()
        for worker in workers:
            await worker.stop()
