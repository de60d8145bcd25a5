"""`weft schedule`: Temporal Schedules that message a standing thread or start new threads."""

from __future__ import annotations

import asyncio
import io
import json
import uuid
from collections.abc import Awaitable, Callable
from contextlib import redirect_stderr, redirect_stdout
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import yaml
from support import add_script, agent_definitions, idle_after, start_thread, wait_until
from temporalio.client import (
    Schedule,
    ScheduleActionStartWorkflow,
    ScheduleIntervalSpec,
    ScheduleSpec,
    WorkflowExecutionStatus,
)

import weft
from weft.cli.main import run
from weft.client.schedules import RUN_MEMO, Schedules, WeftSchedule
from weft.contract.thread import SIGNAL_TERMINATE

T = TypeVar("T")


def _cli_config(tmp_path: Path, weft_config: Any, task_queue: str) -> Path:
    path = tmp_path / "cli.yml"
    path.write_text(
        yaml.safe_dump(
            {
                "temporal": {"address": weft_config.temporal.address, "taskQueue": task_queue},
                "store": {"url": weft_config.store_url()},
            }
        )
    )
    return path


async def _weft(config: Path, *args: str) -> tuple[int, str, str]:
    """Run the `weft` entry point in-process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()

    def call() -> int:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                return run(["--config", str(config), *args])
            except SystemExit as exit_:  # argparse refuses bad usage this way
                return int(exit_.code or 0)

    # `run` drives its own event loop, so it runs in a thread beside the test's loop.
    code = await asyncio.to_thread(call)
    return code, out.getvalue(), err.getvalue()


async def _ok(config: Path, *args: str) -> str:
    code, out, err = await _weft(config, *args)
    assert code == 0, f"weft {' '.join(args)} exited {code}: {err}"
    return out


async def _eventually(
    probe: Callable[[], Awaitable[T]], holds: Callable[[T], bool], *, timeout: float = 20
) -> T:
    """Poll `probe` until its value satisfies `holds`, or fail naming the last value."""
    deadline = asyncio.get_running_loop().time() + timeout
    value = await probe()
    while not holds(value):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s; last value: {value}")
        await asyncio.sleep(0.2)
        value = await probe()
    return value


def _name(kind: str) -> str:
    return f"{kind}-{uuid.uuid4().hex[:8]}"


async def test_thread_schedule_delivers_pauses_resumes_and_deletes(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A --thread schedule queues its message to the thread every interval, marked with the
    schedule's name; pause stops the deliveries, unpause resumes them, delete unlists it."""
    script = add_script(scripted_server, {"replies": [{"text": "pong"}]})
    worker = await start_worker(agent_definitions(script))
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    thread = await start_thread(temporal_client, worker.task_queue)
    name = _name("tick")
    schedules = Schedules(temporal_client, task_queue=worker.task_queue)

    created = await _ok(
        config, "schedule", "create", name, "--every", "1s", "--thread", thread.id, "-m", "tick"
    )
    assert f"created schedule {name}: thread {thread.id}, every 1s" in created
    await wait_until(thread, idle_after(2))
    delivered = [m for m in worker.store.messages.list(thread.id) if m.role == "user"]
    assert delivered and {m.content for m in delivered} == {"tick"}
    assert all(m.metadata.get("schedule") == name for m in delivered)

    await _ok(config, "schedule", "pause", name, "--note", "quiet hours")
    # A delivery started just before the pause may still land; then nothing more does.
    await asyncio.sleep(1.2)
    settled = await wait_until(thread, idle_after(2))
    runs = (await schedules.describe(name)).runs
    await asyncio.sleep(2.5)
    assert (await schedules.describe(name)).runs == runs, "a paused schedule fired"
    assert (await wait_until(thread, idle_after(2))).counters.turns == settled.counters.turns
    listed = await _eventually(lambda: _ok(config, "schedule", "list"), lambda out: name in out)
    row = next(line for line in listed.splitlines() if line.startswith(name))
    assert "paused (quiet hours)" in row and f"thread {thread.id}" in row and "every 1s" in row
    assert "last: completed" in row

    await _ok(config, "schedule", "unpause", name)
    await wait_until(thread, idle_after(settled.counters.turns + 1))
    assert (await schedules.describe(name)).runs > runs

    assert f"deleted schedule {name}" in await _ok(config, "schedule", "delete", name)
    assert name not in await _ok(config, "schedule", "list")
    code, _, err = await _weft(config, "schedule", "show", name)
    assert code == 1 and f"no schedule named '{name}'" in err


async def test_agent_schedule_starts_a_new_thread_each_run(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """An --agent schedule starts a new thread on every run (overlap allow_all), each with
    the message as its first turn and the schedule's name in its memo and UI summary."""
    script = add_script(scripted_server, {"replies": [{"text": "good morning"}]})
    worker = await start_worker(agent_definitions(script))
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    name = _name("morning")
    await _ok(config, "schedule", "create", name, "--every", "1s", "--agent", "helper", "-m", "hi")
    try:
        described = await _eventually(
            lambda: Schedules(temporal_client).describe(name), lambda s: len(s.recent_runs) >= 2
        )
    finally:
        await _ok(config, "schedule", "delete", name)
    assert described.overlap == "allow_all"
    thread_ids = [run.workflow_id for run in described.recent_runs]
    assert len(set(thread_ids)) == len(thread_ids)
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


async def test_delivery_to_a_closed_thread_fails_its_run_and_pauses(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A delivery to a thread that has closed fails its run with an error naming the thread,
    and the schedule pauses itself instead of failing on every later run."""
    script = add_script(scripted_server, {"replies": [{"text": "pong"}]})
    worker = await start_worker(agent_definitions(script))
    config = _cli_config(tmp_path, weft_config, worker.task_queue)
    thread = await start_thread(temporal_client, worker.task_queue)
    name = _name("orphan")
    await _ok(config, "schedule", "create", name, "--every", "1h", "--thread", thread.id, "-m", "x")
    await thread.signal(SIGNAL_TERMINATE, {"reason": "done"})
    await thread.result()

    assert f"triggered schedule {name}" in await _ok(config, "schedule", "trigger", name)
    schedules = weft.Schedules(temporal_client, task_queue=worker.task_queue)

    def failed_and_paused(schedule: WeftSchedule) -> bool:
        return schedule.paused and schedule.last_run is not None and bool(schedule.last_run.error)

    shown = await _eventually(lambda: schedules.describe(name), failed_and_paused)
    assert shown.last_run is not None and shown.last_run.status == "failed"
    assert f"cannot deliver to thread '{thread.id}'" in (shown.last_run.error or "")
    assert "does not exist or is closed" in (shown.last_run.error or "")
    as_json = json.loads(await _ok(config, "schedule", "show", name))
    assert as_json["lastRun"]["status"] == "failed" and as_json["paused"] is True
    await schedules.delete(name)


async def test_bad_schedule_input_is_refused_with_a_clear_error(
    temporal_client, weft_config, tmp_path
):
    """Bad CLI input exits non-zero with one line naming what is wrong, never a traceback."""
    config = _cli_config(tmp_path, weft_config, weft_config.temporal.task_queue)
    name = _name("bad")
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
        code, _, err = await _weft(config, "schedule", "create", name, *args)
        assert (code, message in err) == (expected_code, True), (args, code, err)
        assert "Traceback" not in err
    code, _, err = await _weft(config, "schedule", "create", "bad name", "--every", "1m", *target)
    assert code == 1 and "invalid schedule name 'bad name'" in err

    await _ok(config, "schedule", "create", name, "--every", "1h", *target)
    try:
        code, _, err = await _weft(config, "schedule", "create", name, "--every", "1h", *target)
        assert code == 1 and f"a schedule named '{name}' exists already" in err
    finally:
        await _ok(config, "schedule", "delete", name)
    for action in ("pause", "unpause", "trigger", "delete", "show"):
        code, _, err = await _weft(config, "schedule", action, name)
        assert code == 1 and f"weft: no schedule named '{name}'" in err, (action, err)


async def test_schedules_weft_did_not_create_are_left_alone(temporal_client, weft_config, tmp_path):
    """A schedule without weft's memo is neither listed nor paused or deleted by weft."""
    config = _cli_config(tmp_path, weft_config, weft_config.temporal.task_queue)
    name = _name("foreign")
    await temporal_client.create_schedule(
        name,
        Schedule(
            action=ScheduleActionStartWorkflow("Other", id=name, task_queue="elsewhere"),
            spec=ScheduleSpec(intervals=[ScheduleIntervalSpec(every=timedelta(hours=1))]),
        ),
    )
    try:
        for action in ("pause", "delete"):
            code, _, err = await _weft(config, "schedule", action, name)
            assert code == 1 and "was not created by weft" in err
        await _eventually(_all_schedule_ids(temporal_client), lambda ids: name in ids)
        assert name not in await _ok(config, "schedule", "list")
        await temporal_client.get_schedule_handle(name).describe()  # still there
    finally:
        await temporal_client.get_schedule_handle(name).delete()


def _all_schedule_ids(client: Any) -> Callable[[], Awaitable[list[str]]]:
    async def ids() -> list[str]:
        return [entry.id async for entry in await client.list_schedules()]

    return ids
