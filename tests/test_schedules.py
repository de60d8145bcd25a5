"""`weft schedule`: Temporal Schedules that message a standing thread or start new threads."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from schedule_support import cli_config, eventually, schedule_name, weft_cli, weft_ok
from support import add_script, agent_definitions, idle_after, start_thread, wait_until
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    WorkflowExecutionStatus,
)

import weft
from weft.client.schedules import RUN_MEMO, Schedules, WeftSchedule
from weft.contract.thread import SIGNAL_TERMINATE


async def test_thread_schedule_delivers_pauses_resumes_and_deletes(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A --thread schedule queues its message to the thread every interval, marked with the
    schedule's name; pause stops the deliveries, unpause resumes them, delete unlists it."""
    script = add_script(scripted_server, {"replies": [{"text": "pong"}]})
    worker = await start_worker(agent_definitions(script))
    config = cli_config(tmp_path, weft_config, worker.task_queue)
    thread = await start_thread(temporal_client, worker.task_queue)
    name = schedule_name("tick")
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)

    created = await weft_ok(
        config, "schedule", "create", name, "--every", "1s", "--thread", thread.id, "-m", "tick"
    )
    assert f"created schedule {name}: thread {thread.id}, every 1s" in created
    await wait_until(thread, idle_after(2))
    delivered = [m for m in worker.store.messages.list(thread.id) if m.role == "user"]
    assert delivered and {m.content for m in delivered} == {"tick"}
    assert all(m.metadata.get("schedule") == name for m in delivered)

    await weft_ok(config, "schedule", "pause", name, "--note", "quiet hours")
    # A delivery started just before the pause may still land; then nothing more does.
    await asyncio.sleep(1.2)
    settled = await wait_until(thread, idle_after(2))
    runs = (await schedules.describe(name)).runs
    await asyncio.sleep(2.5)
    assert (await schedules.describe(name)).runs == runs, "a paused schedule fired"
    assert (await wait_until(thread, idle_after(2))).counters.turns == settled.counters.turns
    listed = await eventually(lambda: weft_ok(config, "schedule", "list"), lambda out: name in out)
    row = next(line for line in listed.splitlines() if line.startswith(name))
    assert "paused (quiet hours)" in row and f"thread {thread.id}" in row and "every 1s" in row
    assert "last: completed" in row

    await weft_ok(config, "schedule", "unpause", name)
    await wait_until(thread, idle_after(settled.counters.turns + 1))
    assert (await schedules.describe(name)).runs > runs

    assert f"deleted schedule {name}" in await weft_ok(config, "schedule", "delete", name)
    assert name not in await weft_ok(config, "schedule", "list")
    code, _, err = await weft_cli(config, "schedule", "show", name)
    assert code == 1 and f"no schedule named '{name}'" in err


async def test_agent_schedule_starts_a_new_thread_each_run(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """An --agent schedule starts a new `<agent>-<12 hex>` thread on every run (overlap
    allow_all), each with the message as its first turn, the schedule's name in its memo and
    UI summary, and found from the schedule by `schedule show`, `schedule list` and
    `thread list --schedule`."""
    script = add_script(scripted_server, {"replies": [{"text": "good morning"}]})
    worker = await start_worker(agent_definitions(script))
    config = cli_config(tmp_path, weft_config, worker.task_queue)
    name = schedule_name("morning")
    await weft_ok(
        config, "schedule", "create", name, "--every", "1s", "--agent", "helper", "-m", "hi"
    )
    try:
        described = await eventually(
            lambda: Schedules(temporal_client).describe(name),
            lambda s: sum(run.thread_id is not None for run in s.recent_runs) >= 2,
        )
        shown = json.loads(await weft_ok(config, "schedule", "show", name))
        # The last run can be one that has not named its thread yet: wait for one that has.
        listed = await eventually(
            lambda: weft_ok(config, "schedule", "list"),
            lambda out: bool(
                re.search(rf"^{name}\t.*\tlast: running helper-[0-9a-f]{{12}}$", out, re.M)
            ),
        )
    finally:
        await weft_ok(config, "schedule", "delete", name)
    assert described.overlap == "allow_all"
    started = [run for run in described.recent_runs if run.thread_id is not None]
    thread_ids = [run.thread_id for run in started if run.thread_id is not None]
    assert len(set(thread_ids)) == len(thread_ids)
    assert all(re.fullmatch(r"helper-[0-9a-f]{12}", thread_id) for thread_id in thread_ids)
    assert all(run.workflow_id.startswith(f"{name}-start-") for run in started)
    assert set(thread_ids) <= {run["threadId"] for run in shown["recentRuns"]}
    assert f"{name}\tagent helper (a new thread each run)\tevery 1s\tactive" in listed
    for thread_id in thread_ids[:2]:
        handle = temporal_client.get_workflow_handle(thread_id)
        state = await wait_until(handle, idle_after(1))
        assert state.agent == "helper" and state.last_outcome == "good morning"
        execution = await handle.describe()
        assert execution.status == WorkflowExecutionStatus.RUNNING, "an earlier thread ended"
        assert await execution.memo_value(RUN_MEMO) == name
        assert await execution.static_summary() == f"weft schedule {name}: a new helper thread"
        first = worker.store.messages.list(thread_id)[0]
        assert (first.role, first.content, first.metadata) == ("user", "hi", {"schedule": name})
    threads = await eventually(
        lambda: weft_ok(config, "thread", "list", "--schedule", name),
        lambda out: set(thread_ids[:2]) <= set(re.findall(r"^\S+", out, re.M)),
    )
    assert all(line.startswith("helper-") for line in threads.splitlines())


async def test_delivery_to_a_closed_thread_fails_its_run_and_pauses(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A delivery to a thread that has closed fails its run with an error naming the thread,
    and the schedule pauses itself instead of failing on every later run."""
    script = add_script(scripted_server, {"replies": [{"text": "pong"}]})
    worker = await start_worker(agent_definitions(script))
    config = cli_config(tmp_path, weft_config, worker.task_queue)
    thread = await start_thread(temporal_client, worker.task_queue)
    name = schedule_name("orphan")
    await weft_ok(
        config, "schedule", "create", name, "--every", "1h", "--thread", thread.id, "-m", "x"
    )
    await thread.signal(SIGNAL_TERMINATE, {"reason": "done"})
    await thread.result()

    assert f"triggered schedule {name}" in await weft_ok(config, "schedule", "trigger", name)
    schedules = weft.Schedules(temporal_client, task_queue=worker.task_queue)

    def failed_and_paused(schedule: WeftSchedule) -> bool:
        return schedule.paused and schedule.last_run is not None and bool(schedule.last_run.error)

    shown = await eventually(lambda: schedules.describe(name), failed_and_paused)
    assert shown.last_run is not None and shown.last_run.status == "failed"
    assert f"cannot deliver to thread '{thread.id}'" in (shown.last_run.error or "")
    assert "does not exist or is closed" in (shown.last_run.error or "")
    as_json = json.loads(await weft_ok(config, "schedule", "show", name))
    assert as_json["lastRun"]["status"] == "failed" and as_json["paused"] is True
    await schedules.delete(name)


async def test_bad_schedule_input_is_refused_with_a_clear_error(
    temporal_client, weft_config, tmp_path
):
    """Bad CLI input exits non-zero with one line naming what is wrong, never a traceback."""
    config = cli_config(tmp_path, weft_config, weft_config.temporal.task_queue)
    name = schedule_name("bad")
    target = ["--agent", "helper", "-m", "hi"]
    cases: list[tuple[list[str], int, str]] = [
        (["--every", "1m", "--thread", "t", *target], 2, "not allowed with argument"),
        (["--every", "1m", "-m", "hi"], 2, "one of the arguments --thread --agent is required"),
        (["--cron", "0 9 * *", *target], 1, "CronString does not have 5-7 fields"),
        (["--cron", "61 * * * *", *target], 1, "Minute is not in range"),
        (["--every", "5x", *target], 1, "unknown --every '5x'"),
        (["--every", "0s", *target], 1, "--every '0s' is below the minimum of 1s"),
        (["--every", "1m", "--catchup-window", "5s", *target], 1, "--catchup-window '5s' is below"),
        (["--every", "1m", "--catchup-window", "soon", *target], 1, "unknown --catchup-window"),
        (["--every", "1m", "--thread", "no-such-thread", "-m", "hi"], 1, "not found"),
        (["--every", "1m", "--overlap", "sometimes", *target], 2, "invalid choice"),
    ]
    for args, expected_code, message in cases:
        code, _, err = await weft_cli(config, "schedule", "create", name, *args)
        assert (code, message in err) == (expected_code, True), (args, code, err)
        assert "Traceback" not in err
    code, _, err = await weft_cli(
        config, "schedule", "create", "bad name", "--every", "1m", *target
    )
    assert code == 1 and "invalid schedule name 'bad name'" in err

    await weft_ok(config, "schedule", "create", name, "--every", "1h", *target)
    try:
        code, _, err = await weft_cli(config, "schedule", "create", name, "--every", "1h", *target)
        assert code == 1 and f"a schedule named '{name}' exists already" in err
    finally:
        await weft_ok(config, "schedule", "delete", name)
    for action in ("pause", "unpause", "trigger", "delete", "show"):
        code, _, err = await weft_cli(config, "schedule", action, name)
        assert code == 1 and f"weft: no schedule named '{name}'" in err, (action, err)


async def test_schedules_weft_did_not_create_are_left_alone(temporal_client, weft_config, tmp_path):
    """A schedule without weft's memo is neither listed nor paused or deleted by weft."""
    config = cli_config(tmp_path, weft_config, weft_config.temporal.task_queue)
    name = schedule_name("foreign")
    await temporal_client.create_schedule(
        name,
        Schedule(
            action=ScheduleActionStartWorkflow("Other", id=name, task_queue="elsewhere"),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
        ),
    )
    try:
        for action in ("pause", "delete"):
            code, _, err = await weft_cli(config, "schedule", action, name)
            assert code == 1 and "was not created by weft" in err
        await eventually(_all_schedule_ids(temporal_client), lambda ids: name in ids)
        assert name not in await weft_ok(config, "schedule", "list")
        await temporal_client.get_schedule_handle(name).describe()  # still there
    finally:
        await temporal_client.get_schedule_handle(name).delete()


def _all_schedule_ids(client: Any) -> Callable[[], Awaitable[list[str]]]:
    async def ids() -> list[str]:
        return [entry.id async for entry in await client.list_schedules()]

    return ids
