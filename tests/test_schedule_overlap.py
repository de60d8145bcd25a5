"""`--agent` schedules: overlap policies act on the threads the runs start, and schedules
made before runs had their own workflow keep working."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from schedule_support import cli_config, eventually, schedule_name, weft_ok
from support import add_script, agent_definitions, idle_after, wait_until
from temporalio.client import (
    Client,
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    WorkflowExecutionStatus,
    WorkflowFailureError,
)
from temporalio.common import VersioningBehavior
from temporalio.worker import Replayer

from weft.client.schedules import SCHEDULE_MEMO, Schedules, ScheduleTarget, WeftSchedule
from weft.contract.scheduled_threads import SCHEDULED_THREAD_TYPE
from weft.contract.thread import SIGNAL_TERMINATE, WORKFLOW_TYPE, ThreadStartInput
from weft.workers.config import DeploymentConfig
from weft.workflows.scheduled_thread import (
    INVALID_SCHEDULED_THREAD,
    ScheduledThreadStartWorkflow,
)

READABLE_ID = re.compile(r"helper-[0-9a-f]{12}")


def _thread_ids(schedule: WeftSchedule) -> list[str]:
    return [run.thread_id for run in schedule.recent_runs if run.thread_id is not None]


async def _status(client: Client, workflow_id: str) -> WorkflowExecutionStatus | None:
    return (await client.get_workflow_handle(workflow_id).describe()).status


async def test_skip_waits_for_the_previous_thread_to_close(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Under `skip`, a run stays open while its thread runs, so later firings are skipped
    until that thread closes; the next firing then starts a new thread."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    worker = await start_worker(agent_definitions(script))
    config = cli_config(tmp_path, weft_config, worker.task_queue)
    name = schedule_name("single")
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)
    await weft_ok(
        config,
        "schedule",
        "create",
        name,
        "--every",
        "1s",
        "--agent",
        "helper",
        "-m",
        "hi",
        "--overlap",
        "skip",
    )
    try:
        waiting = await eventually(
            lambda: schedules.describe(name),
            lambda s: s.skipped_overlap >= 2 and len(_thread_ids(s)) == 1,
        )
        assert waiting.runs == 1 and waiting.overlap == "skip"
        (first,) = _thread_ids(waiting)
        assert READABLE_ID.fullmatch(first)
        assert waiting.last_run is not None and waiting.last_run.status == "running"
        starter = waiting.last_run.workflow_id
        assert await _status(temporal_client, starter) == WorkflowExecutionStatus.RUNNING

        thread = temporal_client.get_workflow_handle(first)
        await wait_until(thread, idle_after(1))
        await thread.signal(SIGNAL_TERMINATE, {"reason": "done"})
        after = await eventually(
            lambda: schedules.describe(name), lambda s: len(_thread_ids(s)) >= 2
        )
    finally:
        await schedules.delete(name)
    assert await _status(temporal_client, starter) == WorkflowExecutionStatus.COMPLETED
    second = next(t for t in _thread_ids(after) if t != first)
    assert READABLE_ID.fullmatch(second)
    history = await temporal_client.get_workflow_handle(starter).fetch_history()
    # The run's commands are what its code issues today (no nondeterminism on replay).
    await Replayer(workflows=[ScheduledThreadStartWorkflow], debug_mode=True).replay_workflow(
        history
    )


async def test_terminate_other_terminates_the_previous_thread(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Under `terminate_other`, each firing hard-terminates the thread the previous run
    started, so one thread is alive at a time."""
    thread_ids = await _three_threads(
        start_worker, temporal_client, scripted_server, weft_config, tmp_path, "terminate_other"
    )
    earlier = thread_ids[:-2]
    for thread_id in earlier:
        status = await eventually(
            partial(_status, temporal_client, thread_id),
            lambda s: s != WorkflowExecutionStatus.RUNNING,
        )
        assert status == WorkflowExecutionStatus.TERMINATED, thread_id


async def test_schedule_made_before_starter_runs_still_starts_and_shows_threads(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A schedule whose action starts `AgentThread` itself (as weft once made them) still
    starts threads, and `describe` names each run's thread (the run itself) and its status."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    worker = await start_worker(agent_definitions(script))
    name = schedule_name("legacy")
    target = ScheduleTarget(kind="agent", agent="helper", message_preview="hi", spec="every 1h")
    await temporal_client.create_schedule(
        name,
        Schedule(
            action=ScheduleActionStartWorkflow(
                WORKFLOW_TYPE,
                ThreadStartInput(agent="helper", messages=[{"role": "user", "content": "hi"}]),
                id=f"{name}-thread",
                task_queue=worker.task_queue,
            ),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
        ),
        memo={SCHEDULE_MEMO: target.model_dump(mode="json")},
    )
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)
    try:
        await schedules.trigger(name)
        described = await eventually(lambda: schedules.describe(name), lambda s: s.runs >= 1)
    finally:
        await schedules.delete(name)
    last = described.last_run
    assert last is not None and last.thread_id == last.workflow_id
    assert last.workflow_id.startswith(f"{name}-thread-") and last.status == "running"
    await wait_until(temporal_client.get_workflow_handle(last.workflow_id), idle_after(1))


async def test_starter_with_bad_input_fails_its_run_naming_the_problem(
    start_worker, temporal_client, scripted_server
):
    """A `ScheduledThreadStart` run given bad input fails at once with an error naming the
    field, instead of failing its workflow task for ever."""
    worker = await start_worker(
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "ok"}]}))
    )
    with pytest.raises(WorkflowFailureError) as failed:
        await temporal_client.execute_workflow(
            SCHEDULED_THREAD_TYPE,
            {"schedule": "x", "start": {"agent": ""}},
            id=f"bad-start-{uuid.uuid4().hex[:8]}",
            task_queue=worker.task_queue,
        )
    cause = failed.value.cause
    assert getattr(cause, "type", None) == INVALID_SCHEDULED_THREAD
    assert "start.agent" in str(cause), str(cause)


async def test_cancel_other_cancels_the_previous_thread(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Under `cancel_other`, each firing asks the thread the previous run started to cancel,
    as it asked that thread itself when the schedule started threads directly."""
    thread_ids = await _three_threads(
        start_worker, temporal_client, scripted_server, weft_config, tmp_path, "cancel_other"
    )
    first = thread_ids[0]
    status = await eventually(
        lambda: _status(temporal_client, first), lambda s: s != WorkflowExecutionStatus.RUNNING
    )
    assert status == WorkflowExecutionStatus.CANCELED


async def test_a_waiting_run_on_a_versioned_worker_is_not_pinned(
    start_worker, temporal_client, scripted_server, weft_config
):
    """On a versioned worker, a run that waits for its thread may move to the current build
    (auto-upgrade), so stopping the old build's workers cannot strand it; its thread is
    pinned like every thread."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    weft_config.deployment = DeploymentConfig(
        name=f"weft-{uuid.uuid4().hex[:8]}", set_current_on_start=True
    )
    worker = await start_worker(agent_definitions(script))
    name = schedule_name("versioned")
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)
    await schedules.create(name, every="1h", agent="helper", message="hi", overlap="skip")
    try:
        await schedules.trigger(name)
        described = await eventually(
            lambda: schedules.describe(name), lambda s: len(_thread_ids(s)) == 1
        )
    finally:
        await schedules.delete(name)
    (thread_id,) = _thread_ids(described)
    await wait_until(temporal_client.get_workflow_handle(thread_id), idle_after(1))
    assert described.last_run is not None
    starter = temporal_client.get_workflow_handle(described.last_run.workflow_id)
    assert await _behavior(starter) == VersioningBehavior.AUTO_UPGRADE.value
    assert await _behavior(temporal_client.get_workflow_handle(thread_id)) == (
        VersioningBehavior.PINNED.value
    )


async def _behavior(handle: Any) -> int:
    described = await handle.describe()
    return int(described.raw_description.workflow_execution_info.versioning_info.behavior)


async def _three_threads(
    start_worker: Any,
    temporal_client: Client,
    scripted_server: Any,
    weft_config: Any,
    tmp_path: Any,
    overlap: str,
) -> list[str]:
    """The ids of the threads a `weft schedule create --every 1s --overlap OVERLAP` schedule
    started by its third firing (each a readable id); the schedule is deleted after."""
    script = add_script(scripted_server, {"replies": [{"text": "ok"}]})
    worker = await start_worker(agent_definitions(script))
    config = cli_config(tmp_path, weft_config, worker.task_queue)
    name = schedule_name(overlap.replace("_", "-"))
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)
    create = ["schedule", "create", name, "--every", "1s", "--agent", "helper", "-m", "hi"]
    await weft_ok(config, *create, "--overlap", overlap)
    try:
        described = await eventually(
            lambda: schedules.describe(name), lambda s: len(_thread_ids(s)) >= 3
        )
    finally:
        await schedules.delete(name)
    thread_ids = _thread_ids(described)
    assert all(READABLE_ID.fullmatch(thread_id) for thread_id in thread_ids)
    return thread_ids
