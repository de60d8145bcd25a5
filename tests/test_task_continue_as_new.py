"""A `TaskRun` continues as new from its rests (docs/tasks.md), on the dev server.

One task, given a low `continueAfterEvents`, is driven through each stage a run can
continue from: held before its start, queued on a dependency, and paused between two
attempts (the first failed, `task.retrying` not written yet). Each time the commands and
progress it takes grow its history past the count, and the run continues as new. The task
keeps its status, attempts, progress and dependencies, takes commands after each move, no
event is written twice, its row is its log's fold (so `task_snapshot` reads the same), and
every run replays. `WEFT_RECORD_TASK_HISTORIES=1` writes the runs' histories to
tests/histories/tasks/ (tests/test_replay_tasks.py replays them).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from support import StartWorker, add_script, agent_definitions, run_histories, store_of, until
from temporalio.client import Client, WithStartWorkflowOperation, WorkflowHistory
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import Replayer

from weft.client.tasks import Tasks, new_task_id, now_iso
from weft.contract.events import Event
from weft.contract.tasks import (
    SIGNAL_APPEND_PROGRESS,
    SIGNAL_CANCEL_TASK,
    TASK_WORKFLOW_TYPE,
    UPDATE_PAUSE_TASK,
    UPDATE_RESUME_TASK,
    TaskCommand,
    TaskRecord,
    TaskRunCarry,
    TaskRunInput,
    task_snapshot,
)
from weft.contract.thread import SIGNAL_TERMINATE
from weft.transport.codec import data_converter
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.workflow_runner import workflow_runner
from weft.workflows.tasks.task_continuation import CONTINUE_AS_NEW_PATCH
from weft.workflows.tasks.task_run import TASK_COMMANDS_PATCH, TaskRunWorkflow

HISTORIES = Path(__file__).parent / "histories" / "tasks"
RECORDED = "task_continue_as_new"
ANSWER_SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "properties": {"answer": {"type": "integer"}},
}
# The task's first attempt never answers in time (its thread is closed under it); the
# dependency answers at once.
_SLOW = {
    "turns": [
        {"match": "Dependency", "replies": [{"text": "dependency done"}]},
        {"match": "Answer", "replies": [{"text": "late", "delay_ms": 60_000}]},
    ]
}
_ANSWERING = {
    "turns": [
        {"match": "Dependency", "replies": [{"text": "dependency done"}]},
        {"match": "Answer", "replies": [{"text": '{"answer": 7}'}]},
    ]
}
# Low enough that a handful of commands moves the run; well above a fresh run's length.
_AFTER_EVENTS = 40
_MOST_PUSHES = 25


def _new_task(tasks: Tasks, **fields: Any) -> TaskRecord:
    """Create a held task in the store as `Tasks.create` does, without starting its run."""
    at = now_iso()
    record = TaskRecord.model_validate(
        {
            "taskId": new_task_id(),
            "objective": "Answer with JSON.",
            "assignee": "helper",
            "autoStart": False,
            "constraints": {"maxAttempts": 2},
            "acceptance": {"schema": ANSWER_SCHEMA},
            "createdAt": at,
            "updatedAt": at,
            **fields,
        }
    )
    tasks._store.tasks.create(
        Event.model_validate(
            {
                "type": "task.created",
                "eventId": f"{record.task_id}:created",
                "timestamp": at,
                "threadId": record.task_id,
                "status": "accepted",
                "taskId": record.task_id,
                "payload": {"task": record.model_dump(mode="json")},
            }
        )
    )
    return record


async def _start_low(tasks: Tasks, client: Client, task_queue: str, **start: Any) -> TaskRecord:
    """A held task whose run starts with the low count (`start`: more of
    `start_workflow`'s options)."""
    record = _new_task(tasks)
    run_input = TaskRunInput(task=record, continue_after_events=_AFTER_EVENTS)
    await client.start_workflow(
        TASK_WORKFLOW_TYPE,
        run_input.model_dump(mode="json"),
        id=record.task_id,
        task_queue=task_queue,
        **start,
    )
    return record


class Pusher:
    """Grows the task's history with progress entries until its run continues as new."""

    def __init__(self, tasks: Tasks, client: Client, task_id: str) -> None:
        self._tasks = tasks
        self._handle = client.get_workflow_handle(task_id)
        self.task_id = task_id
        self.sent = 0

    async def run_id(self) -> str:
        described = await self._handle.describe()
        return described.run_id

    async def progress(self) -> None:
        """One progress entry, waited for in the store."""
        self.sent += 1
        await self._handle.signal(SIGNAL_APPEND_PROGRESS, {"message": f"step {self.sent}"})
        sent = self.sent
        await until(
            lambda: len(self._tasks.get(self.task_id).progress) >= sent, f"progress {sent} stored"
        )

    async def until_continued(self, also: Callable[[], Awaitable[None]] | None = None) -> str:
        """Push (progress, and `also` when given) until the run moved; the new run's id."""
        before = await self.run_id()
        for _ in range(_MOST_PUSHES):
            await self.progress()
            if also is not None:
                await also()
            now = await self.run_id()
            if now != before:
                return now
        raise AssertionError(f"{self.task_id} did not continue as new after {_MOST_PUSHES}")


def _carried(history: WorkflowHistory) -> TaskRunCarry | None:
    """What a run was carried from the run before it (None: the first run)."""
    started = history.events[0].workflow_execution_started_event_attributes
    [raw] = data_converter(None).payload_converter.from_payloads(started.input.payloads)
    return TaskRunInput.model_validate(raw).carried


async def _replays(history: WorkflowHistory) -> None:
    converter = data_converter(None)
    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[TaskRunWorkflow],
        data_converter=converter,
        workflow_runner=workflow_runner(converter),
    )
    await replayer.replay_workflow(history)


async def test_a_task_continues_as_new_from_each_rest(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    script = add_script(scripted_server, _SLOW)
    worker = await start_worker(agent_definitions(script))
    tasks = Tasks(temporal_client, store_of(worker), task_queue=worker.task_queue)
    dependency = await tasks.create("Dependency first.", "helper", auto_start=False)
    task = await _start_low(tasks, temporal_client, worker.task_queue)
    task_id = task.task_id
    first_run = (await temporal_client.get_workflow_handle(task_id).describe()).run_id
    push = Pusher(tasks, temporal_client, task_id)

    # 1. Held (not started): linked, then pushed until the run moves.
    await tasks.link(task_id, dependency.task_id, by="ops")
    await push.until_continued()
    held = tasks.get(task_id)
    assert held.status == "accepted" and held.dependencies == [dependency.task_id]

    # 2. Started on the new run, queued on its dependency; paused and resumed meanwhile.
    started = await tasks.start(task_id, by="ops")
    assert started.status == "queued"

    async def pause_and_resume() -> None:
        assert (await tasks.pause(task_id, by="ops")).status == "paused"
        assert (await tasks.resume(task_id, by="ops")).status == "queued"

    await push.until_continued(pause_and_resume)
    assert tasks.get(task_id).status == "queued"
    await pause_and_resume()  # commands still work on the new run

    # 3. The dependency completes; the first attempt runs, is paused under, and fails.
    await tasks.start(dependency.task_id)
    assert (await tasks.wait(dependency.task_id)).status == "completed"
    running = await until(lambda: (t := tasks.get(task_id)).attempts and t, "attempt 1 runs")
    assert (await tasks.pause(task_id, by="ops", reason="hold on")).status == "paused"
    scripted_server.set_script(script, _ANSWERING)
    first = temporal_client.get_workflow_handle(running.attempts[0].thread_id)
    await first.signal(SIGNAL_TERMINATE, {"reason": "closed under the attempt"})
    await until(lambda: tasks.get(task_id).attempts[0].status == "failed", "attempt 1 failed")
    await push.until_continued()  # paused between the attempts, `task.retrying` not written
    paused = tasks.get(task_id)
    assert paused.status == "paused" and len(paused.attempts) == 1

    # 4. Resumed on the new run: the retry, the second attempt, and the task completes.
    await tasks.resume(task_id, by="ops")
    done = await tasks.wait(task_id)
    assert done.status == "completed", done
    assert [(a.number, a.status) for a in done.attempts] == [(1, "failed"), (2, "completed")]
    assert [a.thread_id for a in done.attempts] == [f"{task_id}-a1", f"{task_id}-a2"]
    assert done.dependencies == [dependency.task_id]
    assert [p.message for p in done.progress] == [f"step {n}" for n in range(1, push.sent + 1)]

    # Each fact once; the row is the log's fold, so the snapshot reads the same.
    events = tasks.events(task_id)
    assert len({e.event_id for e in events}) == len(events)
    counts = Counter(e.type for e in events)
    once = [
        "task.created",
        "task.dependency.updated",
        "task.queued",
        "task.started",
        "task.attempt.failed",
        "task.retrying",
        "task.attempt.completed",
        "task.completed",
    ]
    assert {kind: counts[kind] for kind in once} == dict.fromkeys(once, 1), counts
    assert counts["task.attempt.started"] == 2 and counts["task.progress"] == push.sent
    assert counts["task.paused"] == counts["task.resumed"] >= 3
    rebuilt = tasks._store.tasks.rebuild(task_id)
    assert rebuilt is not None and rebuilt == done
    snapshot = tasks.snapshot()
    assert snapshot.delivery[task_id].state == "stored"
    assert snapshot == task_snapshot(
        [r for r in (tasks._store.tasks.rebuild(t.task_id) for t in tasks.list()) if r]
    )

    # Every run replays, each with both patches; the chain moved at least three times.
    runs = await run_histories(temporal_client, task_id, first_run)
    carried = [_carried(history) for history in runs[1:]]
    stages = [(c.stage, c.made, c.retry_due, c.paused_from) for c in carried if c]
    assert stages[0] == ("waiting", 0, False, None), stages
    assert [s for s in stages if s[0] == "queued"], stages  # paused or not: either rests
    assert stages[-1] == ("attempting", 1, True, "running"), stages
    for history in runs:
        await _replays(history)
    if os.environ.get("WEFT_RECORD_TASK_HISTORIES"):
        for n, history in enumerate(runs, start=1):
            (HISTORIES / f"{RECORDED}_run{n}.json").write_text(history.to_json())


async def test_progress_with_the_first_activation_is_kept(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """Progress signalled as a run starts (as one sent while its run continued as new
    lands in the next run) is handled before the run has read its input: it is kept."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, _SLOW)))
    tasks = Tasks(temporal_client, store_of(worker), task_queue=worker.task_queue)
    task = await _start_low(
        tasks,
        temporal_client,
        worker.task_queue,
        start_signal=SIGNAL_APPEND_PROGRESS,
        start_signal_args=[{"message": "with the start"}],
    )
    kept = await until(lambda: tasks.get(task.task_id).progress, "the progress is stored")
    assert [p.message for p in kept] == ["with the start"]
    await tasks.cancel(task.task_id)
    assert (await tasks.wait(task.task_id)).status == "cancelled"


async def test_a_command_with_a_carried_runs_first_activation_keeps_it_there(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """A run carried queued on its dependency takes `pause` in its first activation (as a
    command sent while the run before it continued as new does): the pause changes what
    the run's rest waits for in that activation, and the run stays (it decides to leave
    only when the wait's condition is checked, with no handler running): the update
    answers from this run and the task is paused."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, _SLOW)))
    tasks = Tasks(temporal_client, store_of(worker), task_queue=worker.task_queue)
    dependency = await tasks.create("Dependency first.", "helper", auto_start=False)
    task = _new_task(tasks, dependencies=[dependency.task_id])
    record = task.model_copy(update={"status": "queued"})  # as its run left it: started, queued
    carried = TaskRunCarry(
        stage="queued", began=now_iso(), start=TaskCommand(by="ops"), paused_from=None
    )
    start: WithStartWorkflowOperation[Any, Any] = WithStartWorkflowOperation(
        TASK_WORKFLOW_TYPE,
        TaskRunInput(task=record, carried=carried, continue_after_events=_AFTER_EVENTS).model_dump(
            mode="json"
        ),
        id=task.task_id,
        task_queue=worker.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
    )
    paused = await temporal_client.execute_update_with_start_workflow(
        UPDATE_PAUSE_TASK, {"by": "ops"}, start_workflow_operation=start
    )
    assert paused["status"] == "paused"
    handle = await start.workflow_handle()
    described = await handle.describe()
    assert described.run_id == handle.first_execution_run_id  # it did not move
    resumed = await handle.execute_update(UPDATE_RESUME_TASK, {"by": "ops"})
    assert resumed["status"] == "queued"
    await handle.signal(SIGNAL_CANCEL_TASK, {"reason": "done"})
    assert (await handle.result())["status"] == "cancelled"


@pytest.mark.parametrize("after", [39, 50_001])
def test_the_count_is_bounded(after: int) -> None:
    """A count a fresh run could already pass (a run moving at every rest) or one above
    Temporal's own history limit is refused, naming the field."""
    with pytest.raises(ValueError, match="continueAfterEvents"):
        TaskRunInput.model_validate(
            {
                "task": {
                    "taskId": "task-aaaaaaaaaaaa",
                    "objective": "x",
                    "assignee": "helper",
                    "createdAt": "t",
                    "updatedAt": "t",
                },
                "continueAfterEvents": after,
            }
        )


@pytest.mark.parametrize(
    ("carried", "field"),
    [
        ({"stage": "attempting", "began": "2026-11-27T10:00:00Z", "made": 1}, "carried.made"),
        ({"stage": "queued", "began": "2026-11-27T10:00:00Z", "retryDue": True}, "retryDue"),
    ],
)
def test_a_carried_point_the_task_cannot_stand_at_is_refused(
    carried: dict[str, Any], field: str
) -> None:
    """A carried point naming attempts the task has not made is refused, naming the field
    (the run ends with it rather than failing its workflow task on every try)."""
    task = {
        "taskId": "task-aaaaaaaaaaaa",
        "objective": "x",
        "assignee": "helper",
        "createdAt": "t",
        "updatedAt": "t",
    }
    with pytest.raises(ValueError, match=field):
        TaskRunInput.model_validate({"task": task, "carried": carried})


def _markers(history: Any) -> list[str]:
    from support import patch_markers

    return [name for _, name in patch_markers(history)]


def test_recorded_runs_carry_both_patches() -> None:
    """The committed runs of the scenario each asked both patches at their start."""
    recorded = sorted(HISTORIES.glob(f"{RECORDED}_run*.json"))
    assert len(recorded) >= 4
    for path in recorded:
        history = WorkflowHistory.from_json(path.stem, path.read_text())
        assert _markers(history) == [TASK_COMMANDS_PATCH, CONTINUE_AS_NEW_PATCH]
