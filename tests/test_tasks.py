"""Tasks on the dev server with the scripted model: the lifecycle and its events,
acceptance by schema, retries, dependencies, cycles and cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support import (
    StartWorker,
    add_script,
    agent_definitions,
    event_schema_validator,
    store_of,
    until,
)
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.worker import Replayer

from weft.client.tasks import TaskError, Tasks
from weft.contract.tasks import TaskRecord
from weft.contract.thread import SIGNAL_TERMINATE, WORKFLOW_TYPE
from weft.transport.codec import data_converter
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.workflow_runner import workflow_runner
from weft.workflows.tasks.task_run import TaskRunWorkflow

ANSWER_SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "properties": {"answer": {"type": "integer"}},
}


async def _tasks(
    start_worker: StartWorker,
    client: Client,
    server: ScriptedModelServer,
    script: dict[str, Any],
) -> Tasks:
    worker = await start_worker(agent_definitions(add_script(server, script)))
    return Tasks(client, store_of(worker), task_queue=worker.task_queue)


async def _ended(tasks: Tasks, task_id: str) -> TaskRecord:
    return await asyncio.wait_for(tasks.wait(task_id), timeout=60)


async def _assert_runs_replay(client: Client, task_id: str) -> None:
    """Every run of the task's workflow replays on today's code without non-determinism."""
    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[TaskRunWorkflow],
        data_converter=data_converter(None),
        workflow_runner=workflow_runner(data_converter(None)),
    )
    runs = [r async for r in client.list_workflows(f"WorkflowId = '{task_id}'")]
    assert runs
    for run in runs:
        history = await client.get_workflow_handle(task_id, run_id=run.run_id).fetch_history()
        await replayer.replay_workflow(history)


def _types(tasks: Tasks, task_id: str) -> list[str]:
    """The task's event types in log order, each event checked against the schema."""
    validator = event_schema_validator()
    events = tasks.events(task_id)
    for event in events:
        wire = event.to_wire()
        validator.validate(wire)
        assert wire["taskId"] == task_id and wire["status"]
    return [e.type for e in events]


async def test_task_runs_to_completed_with_valid_events(
    start_worker, temporal_client, scripted_server
):
    """A task runs its assignee in a thread of its own and completes with the answer; its
    events validate against the schema and rebuild the stored row."""
    tasks = await _tasks(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "Done."}]}
    )
    created = await tasks.create("Say done.", "helper")
    assert created.status in ("accepted", "queued", "running") and created.task_id.startswith(
        "task-"
    )
    done = await _ended(tasks, created.task_id)
    assert done.status == "completed" and done.output is not None
    assert done.output.response == "Done." and done.delivery.state == "stored"
    [attempt] = done.attempts
    assert attempt.status == "completed" and attempt.thread_id == done.output.thread_id
    assert done.delivery.output_ref == done.output.message_id is not None
    assert _types(tasks, created.task_id) == [
        "task.created",
        "task.queued",
        "task.started",
        "task.attempt.started",
        "task.attempt.completed",
        "task.completed",
    ]
    assert tasks.snapshot().recent_terminal[0].task_id == created.task_id
    store = tasks._store
    assert store.tasks.rebuild(created.task_id) == store.tasks.get(created.task_id)
    await _assert_runs_replay(temporal_client, created.task_id)


async def test_answer_failing_the_schema_makes_a_new_attempt(
    start_worker, temporal_client, scripted_server
):
    """An answer that does not validate against the acceptance schema fails its attempt,
    and the next attempt's valid answer completes the task; the first attempt stays."""
    script = {"replies": [{"text": '{"answer": 42}', "faulty_text": "no idea", "times": 1}]}
    tasks = await _tasks(start_worker, temporal_client, scripted_server, script)
    created = await tasks.create(
        "Answer.", "helper", acceptance_schema=ANSWER_SCHEMA, constraints={"maxAttempts": 2}
    )
    done = await _ended(tasks, created.task_id)
    assert done.status == "completed" and done.output is not None
    assert done.output.structured == {"answer": 42}
    first, second = done.attempts
    assert first.status == "failed" and "not JSON" in (first.error or "")
    assert second.status == "completed" and first.thread_id != second.thread_id
    assert "task.retrying" in _types(tasks, created.task_id)


async def test_retry_of_a_failed_task_is_a_new_attempt(
    start_worker, temporal_client, scripted_server
):
    """A task that failed its only attempt is retried as a new attempt that completes it,
    keeping the failed attempt."""
    script = {
        "replies": [{"text": '{"answer": 7}', "faulty_text": '{"answer": "seven"}', "times": 1}]
    }
    tasks = await _tasks(start_worker, temporal_client, scripted_server, script)
    created = await tasks.create("Answer.", "helper", acceptance_schema=ANSWER_SCHEMA)
    failed = await _ended(tasks, created.task_id)
    assert failed.status == "failed" and "answer" in (failed.reason or "")
    assert "at answer" in (failed.attempts[0].error or "")
    with pytest.raises(TaskError, match="is failed"):
        await tasks.cancel(created.task_id)
    await tasks.retry(created.task_id, "try again")
    done = await _ended(tasks, created.task_id)
    assert done.status == "completed"
    assert [a.status for a in done.attempts] == ["failed", "completed"]
    assert [a.number for a in done.attempts] == [1, 2]
    assert _types(tasks, created.task_id)[-6:] == [
        "task.retrying",
        "task.queued",
        "task.started",
        "task.attempt.started",
        "task.attempt.completed",
        "task.completed",
    ]
    assert done.attempts[0].run_id != done.attempts[1].run_id
    await _assert_runs_replay(temporal_client, created.task_id)


async def test_dependencies_run_in_order(start_worker, temporal_client, scripted_server):
    """A task waits for its dependency to complete before its first attempt starts."""
    tasks = await _tasks(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "ok"}]}
    )
    later_id = "task-00000000b0b0"
    first_id = "task-00000000a0a0"
    # Created first, naming a dependency that does not exist yet: it waits for it.
    later = await tasks.create("Second.", "helper", task_id=later_id, dependencies=[first_id])
    await until(lambda: tasks.get(later.task_id).status == "queued", "the dependent is queued")
    assert tasks.get(later.task_id).attempts == []
    await tasks.create("First.", "helper", task_id=first_id)
    first = await _ended(tasks, first_id)
    second = await _ended(tasks, later_id)
    assert first.status == second.status == "completed"
    assert second.attempts[0].started_at >= (first.attempts[0].ended_at or "")
    edges = [(e.task_id, e.depends_on) for e in tasks.snapshot().graph]
    assert (later_id, first_id) in edges


async def test_dependency_cycle_is_refused(start_worker, temporal_client, scripted_server):
    """Creating a task that would close a dependency cycle is refused, naming the cycle."""
    tasks = await _tasks(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "ok"}]}
    )
    a, b = "task-0000000000aa", "task-0000000000bb"
    await tasks.create("A.", "helper", task_id=a, dependencies=[b])
    with pytest.raises(TaskError, match=f"dependency cycle: {b} → {a} → {b}"):
        await tasks.create("B.", "helper", task_id=b, dependencies=[a])
    with pytest.raises(TaskError, match="dependency cycle"):
        await tasks.create(
            "C.", "helper", task_id="task-0000000000cc", dependencies=["task-0000000000cc"]
        )
    assert tasks._store.tasks.get(b) is None
    await tasks.cancel(a, "test over")
    assert (await _ended(tasks, a)).status == "cancelled"


async def test_failed_dependency_blocks_the_task(start_worker, temporal_client, scripted_server):
    """A task whose dependency failed is blocked, naming it, and runs once a retry of the
    dependency completes."""
    script = {"replies": [{"text": '{"answer": 1}', "faulty_text": "nope", "times": 1}]}
    tasks = await _tasks(start_worker, temporal_client, scripted_server, script)
    first = await tasks.create("First.", "helper", acceptance_schema=ANSWER_SCHEMA)
    later = await tasks.create("Second.", "helper", dependencies=[first.task_id])
    assert (await _ended(tasks, first.task_id)).status == "failed"
    blocked = await until(
        lambda: (t := tasks.get(later.task_id)).status == "blocked" and t,
        "the dependent is blocked",
    )
    assert blocked.blocked_by == [first.task_id] and first.task_id in (blocked.reason or "")
    assert [r.task_id for r in tasks.snapshot().waiting] == [later.task_id]
    assert "task.blocked" in _types(tasks, later.task_id)
    await tasks.retry(first.task_id)
    assert (await _ended(tasks, later.task_id)).status == "completed"


async def test_cancel_ends_the_attempt_thread(start_worker, temporal_client, scripted_server):
    """Cancelling a running task ends it `cancelled` and terminates its attempt's thread."""
    tasks = await _tasks(
        start_worker,
        temporal_client,
        scripted_server,
        {"replies": [{"text": "late", "delay_ms": 60_000}]},
    )
    created = await tasks.create("Take your time.", "helper")
    running = await until(
        lambda: (t := tasks.get(created.task_id)).attempts and t, "the first attempt started"
    )
    thread = temporal_client.get_workflow_handle(running.attempts[0].thread_id)
    await tasks.append_progress(created.task_id, "halfway", {"fraction": 0.5})
    progressed = await until(
        lambda: (t := tasks.get(created.task_id)).progress and t, "the progress is recorded"
    )
    assert progressed.progress[0].message == "halfway" and progressed.status == "running"
    assert progressed.progress[0].data == {"fraction": 0.5}
    await tasks.cancel(created.task_id, "no longer needed")
    done = await _ended(tasks, created.task_id)
    assert done.status == "cancelled" and done.reason == "no longer needed"
    assert done.attempts[0].status == "cancelled"
    assert _types(tasks, created.task_id)[-3:] == [
        "task.cancel_requested",
        "task.attempt.failed",
        "task.cancelled",
    ]
    await asyncio.wait_for(thread.result(), timeout=30)
    assert (await thread.describe()).status == WorkflowExecutionStatus.COMPLETED
    with pytest.raises(TaskError, match="is cancelled"):
        await tasks.append_progress(created.task_id, "too late")
    await _assert_runs_replay(temporal_client, created.task_id)


async def test_deadline_times_the_task_out(start_worker, temporal_client, scripted_server):
    """A task still running at its deadline ends `timed_out`."""
    tasks = await _tasks(
        start_worker,
        temporal_client,
        scripted_server,
        {"replies": [{"text": "late", "delay_ms": 60_000}]},
    )
    created = await tasks.create("Slow.", "helper", constraints={"deadlineSeconds": 2})
    done = await _ended(tasks, created.task_id)
    assert done.status == "timed_out" and done.attempts[0].status == "timed_out"
    assert _types(tasks, created.task_id)[-2:] == ["task.attempt.failed", "task.timed_out"]


async def test_bad_input_is_refused_naming_the_field(
    start_worker, temporal_client, scripted_server
):
    """create refuses a bad id, an empty objective and an invalid schema, naming each."""
    tasks = await _tasks(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "ok"}]}
    )
    with pytest.raises(TaskError, match="objective"):
        await tasks.create("", "helper")
    with pytest.raises(TaskError, match="not a task id"):
        await tasks.create("x", "helper", task_id="task-1")
    with pytest.raises(TaskError, match="acceptance.schema"):
        await tasks.create("x", "helper", acceptance_schema={"type": "nonsense"})
    with pytest.raises(TaskError, match="no task 'task-000000000000'"):
        tasks.get("task-000000000000")


async def test_unknown_assignee_fails_the_attempt_naming_it(
    start_worker, temporal_client, scripted_server
):
    """An assignee the worker does not define fails the task, and the reason names it."""
    tasks = await _tasks(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "ok"}]}
    )
    created = await tasks.create("Anything.", "nobody-here")
    done = await _ended(tasks, created.task_id)
    assert done.status == "failed" and "nobody-here" in (done.attempts[0].error or "")


async def test_attempt_whose_thread_cannot_start_fails_and_the_next_runs(
    start_worker, temporal_client, scripted_server
):
    """An attempt whose thread cannot start (its id is taken) fails with the reason, and
    the task's next attempt runs and completes it."""
    tasks = await _tasks(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "ok"}]}
    )
    task_id = "task-0000000000ee"
    taken = await temporal_client.start_workflow(
        WORKFLOW_TYPE, {"agent": "helper"}, id=f"{task_id}-a1", task_queue=tasks._task_queue
    )
    created = await tasks.create("Go.", "helper", task_id=task_id, constraints={"maxAttempts": 2})
    done = await _ended(tasks, created.task_id)
    assert done.status == "completed"
    first, second = done.attempts
    assert first.status == "failed" and "already" in (first.error or "").lower()
    assert second.status == "completed"
    # The thread the task did not start is not the task's to close.
    assert (await taken.describe()).status == WorkflowExecutionStatus.RUNNING
    await taken.signal(SIGNAL_TERMINATE, {})
