"""The task commands on the dev server with the scripted model: a held task updated,
delegated, linked and started; pause and resume between attempts; an operator's complete
and fail. Every refusal names its field, or says the task's state forbids it."""

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
from weft.contract.thread import SIGNAL_TERMINATE
from weft.definitions import define_agent
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
    start_worker: StartWorker, client: Client, server: ScriptedModelServer, script: str
) -> Tasks:
    definitions = agent_definitions(script).add(
        define_agent(name="other", sideA={"prompt": "helper_prompt"})
    )
    worker = await start_worker(definitions)
    return Tasks(client, store_of(worker), task_queue=worker.task_queue)


async def _ended(tasks: Tasks, task_id: str) -> TaskRecord:
    return await asyncio.wait_for(tasks.wait(task_id), timeout=60)


def _types(tasks: Tasks, task_id: str) -> list[str]:
    """The task's event types in log order, each checked against the vendored schema."""
    validator = event_schema_validator()
    events = [e.to_wire() for e in tasks.events(task_id)]
    for event in events:
        validator.validate(event)
    return [e["type"] for e in events]


def _payloads(tasks: Tasks, task_id: str, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in tasks.events(task_id) if e.type == kind]


async def _replays(client: Client, task_id: str) -> None:
    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[TaskRunWorkflow],
        data_converter=data_converter(None),
        workflow_runner=workflow_runner(data_converter(None)),
    )
    async for run in client.list_workflows(f"WorkflowId = '{task_id}'"):
        history = await client.get_workflow_handle(task_id, run_id=run.run_id).fetch_history()
        await replayer.replay_workflow(history)


async def _refused(command: Any, match: str, field: str | None) -> TaskError:
    with pytest.raises(TaskError, match=match) as refused:
        await command
    assert refused.value.field == field, refused.value
    return refused.value


async def test_held_task_is_updated_delegated_linked_and_started(
    start_worker, temporal_client, scripted_server
):
    """A task created not to start waits `accepted`; update, delegate, link and unlink
    change it (a cycle is refused, naming it); `start` queues it, and it completes as the
    agent it was delegated to, with the new objective and schema."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "Answer", "replies": [{"text": '{"answer": 7}'}]},
                {"match": "*", "replies": [{"text": "ok"}]},
            ]
        },
    )
    tasks = await _tasks(start_worker, temporal_client, scripted_server, script)
    held = await tasks.create("Old objective.", "helper", auto_start=False)
    other = await tasks.create("Other.", "helper", auto_start=False)
    assert held.status == "accepted" and not held.auto_start

    await _refused(tasks.update(held.task_id, objective=""), "objective", "objective")
    await _refused(
        tasks.update(held.task_id, acceptance={"schema": {"type": "nope"}}),
        "acceptance.schema",
        "acceptance.schema",
    )
    await _refused(tasks.update(held.task_id), "nothing to change", "body")
    updated = await tasks.update(
        held.task_id,
        objective="Answer with JSON.",
        constraints={"maxAttempts": 2},
        acceptance={"schema": ANSWER_SCHEMA},
        by="ops",
        reason="sharper",
    )
    assert updated.objective == "Answer with JSON." and updated.constraints.max_attempts == 2
    assert updated.acceptance.schema_ == ANSWER_SCHEMA and updated.status == "accepted"

    delegated = await tasks.delegate(held.task_id, "other", by="ops")
    assert delegated.assignee == delegated.delegated_to == "other"

    await tasks.link(other.task_id, held.task_id)
    cycle = f"dependency cycle: {held.task_id} → {other.task_id} → {held.task_id}"
    await _refused(tasks.link(held.task_id, other.task_id), cycle, "dependsOn")
    await _refused(
        tasks.link(held.task_id, held.task_id), f"dependency cycle: {held.task_id}", "dependsOn"
    )
    await _refused(tasks.link(other.task_id, held.task_id), "already", "dependsOn")
    await _refused(tasks.link(other.task_id, "task-1"), "not a task id", "dependsOn")
    assert tasks.get(other.task_id).dependencies == [held.task_id]
    unlinked = await tasks.unlink(other.task_id, held.task_id, reason="not needed")
    assert unlinked.dependencies == []
    await _refused(tasks.unlink(other.task_id, held.task_id), "does not depend", "dependsOn")

    started = await tasks.start(held.task_id, by="ops")
    assert started.task_id == held.task_id
    await _refused(tasks.start(held.task_id), "started already", None)
    done = await _ended(tasks, held.task_id)
    assert done.status == "completed" and done.output is not None
    assert done.output.structured == {"answer": 7}
    thread = tasks._store.threads.get(done.attempts[0].thread_id)
    assert thread is not None and thread.agent == "other"
    await _refused(tasks.update(held.task_id, objective="x"), "is completed", None)

    types = _types(tasks, held.task_id)
    assert types[:6] == [
        "task.created",
        "task.updated",
        "task.delegated",
        "task.queued",
        "task.started",
        "task.attempt.started",
    ]
    assert _payloads(tasks, held.task_id, "task.queued")[0]["startedBy"] == "ops"
    assert _payloads(tasks, held.task_id, "task.delegated") == [
        {"to": "other", "from": "helper", "by": "ops"}
    ]
    edges = [p["change"] for p in _payloads(tasks, other.task_id, "task.dependency.updated")]
    assert edges == ["added", "removed"]
    store = tasks._store
    assert store.tasks.rebuild(held.task_id) == store.tasks.get(held.task_id)
    assert store.tasks.rebuild(other.task_id) == store.tasks.get(other.task_id)
    await tasks.cancel(other.task_id, "test over")
    assert (await _ended(tasks, other.task_id)).status == "cancelled"
    await _replays(temporal_client, held.task_id)


async def test_pause_keeps_the_next_attempt_until_resume(
    start_worker, temporal_client, scripted_server
):
    """A task paused while its attempt runs lets that attempt end; the next attempt waits
    for `resume`, and the task then completes. Pause and resume refuse a repeat."""
    slow = {"replies": [{"text": "late", "delay_ms": 60_000}]}
    script = add_script(scripted_server, slow)
    tasks = await _tasks(start_worker, temporal_client, scripted_server, script)
    created = await tasks.create("Work.", "helper", constraints={"maxAttempts": 2})
    running = await until(
        lambda: (t := tasks.get(created.task_id)).attempts and t, "the first attempt started"
    )
    await _refused(
        tasks.update(created.task_id, objective="x"), "only before its attempts start", None
    )
    paused = await tasks.pause(created.task_id, by="ops", reason="hold on")
    assert paused.status == "paused" and paused.attempts[0].status == "running"
    await _refused(tasks.pause(created.task_id), "paused already", None)
    # The first attempt ends (its thread is closed under it) while the task is paused.
    first = temporal_client.get_workflow_handle(running.attempts[0].thread_id)
    await first.signal(SIGNAL_TERMINATE, {"reason": "test"})
    ended = await until(
        lambda: (t := tasks.get(created.task_id)).attempts[0].status == "failed" and t,
        "the first attempt failed",
    )
    await tasks.append_progress(created.task_id, "still paused?")
    waited = await until(
        lambda: (t := tasks.get(created.task_id)).progress and t, "the progress is recorded"
    )
    assert waited.status == "paused" and len(waited.attempts) == 1, ended
    scripted_server.set_script(script, {"replies": [{"text": "Done."}]})
    resumed = await tasks.resume(created.task_id, by="ops")
    assert resumed.status in ("retrying", "running")
    await _refused(tasks.resume(created.task_id), "not paused", None)
    done = await _ended(tasks, created.task_id)
    assert done.status == "completed" and [a.status for a in done.attempts] == [
        "failed",
        "completed",
    ]
    types = _types(tasks, created.task_id)
    paused_at, resumed_at = types.index("task.paused"), types.index("task.resumed")
    assert types.index("task.attempt.failed") < resumed_at < types.index("task.retrying")
    assert paused_at < types.index("task.attempt.failed")
    assert _payloads(tasks, created.task_id, "task.resumed")[0]["status"] == "retrying"
    await _replays(temporal_client, created.task_id)


async def test_operator_completes_and_fails_tasks(start_worker, temporal_client, scripted_server):
    """`complete` checks the output against the acceptance schema, ends the running
    attempt and closes its thread, and records who; `fail` ends a task that never ran."""
    script = add_script(scripted_server, {"replies": [{"text": "late", "delay_ms": 60_000}]})
    tasks = await _tasks(start_worker, temporal_client, scripted_server, script)
    created = await tasks.create("Slow.", "helper", acceptance_schema=ANSWER_SCHEMA)
    running = await until(
        lambda: (t := tasks.get(created.task_id)).attempts and t, "the attempt started"
    )
    await _refused(tasks.complete(created.task_id, response="by hand"), "structured", "structured")
    await _refused(
        tasks.complete(created.task_id, structured={"answer": "five"}),
        "schema at answer",
        "structured",
    )
    done = await tasks.complete(
        created.task_id, response="five", structured={"answer": 5}, by="ops", reason="known"
    )
    assert done.status == "completed" and done.ended_by == "ops" and done.reason == "known"
    assert done.output is not None and done.output.structured == {"answer": 5}
    assert done.output.thread_id is None and done.delivery.state == "stored"
    assert done.attempts[0].status == "cancelled" and "completed by ops" in (
        done.attempts[0].error or ""
    )
    assert _types(tasks, created.task_id)[-2:] == ["task.attempt.failed", "task.completed"]
    thread = temporal_client.get_workflow_handle(running.attempts[0].thread_id)
    await asyncio.wait_for(thread.result(), timeout=30)
    assert (await thread.describe()).status == WorkflowExecutionStatus.COMPLETED
    await _refused(tasks.fail(created.task_id), "is completed", None)

    held = await tasks.create("Never run.", "helper", auto_start=False)
    failed = await tasks.fail(held.task_id, by="ops", reason="not needed")
    assert failed.status == "failed" and failed.ended_by == "ops" and failed.attempts == []
    assert _payloads(tasks, held.task_id, "task.failed") == [{"by": "ops", "reason": "not needed"}]
    await _replays(temporal_client, created.task_id)


async def test_updated_deadline_moves_the_running_deadline(
    start_worker, temporal_client, scripted_server
):
    """A deadline given by `update` replaces the run's: counted from the run's start, it
    times the task out though it had none when created."""
    script = add_script(scripted_server, {"replies": [{"text": "late", "delay_ms": 60_000}]})
    tasks = await _tasks(start_worker, temporal_client, scripted_server, script)
    held = await tasks.create("Slow.", "helper", auto_start=False)
    await tasks.update(held.task_id, constraints={"deadlineSeconds": 1})
    done = await _ended(tasks, held.task_id)
    assert done.status == "timed_out" and done.attempts == []
    assert _types(tasks, held.task_id)[-2:] == ["task.updated", "task.timed_out"]
