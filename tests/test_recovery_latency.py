"""A thread cached on a worker that is SIGKILLed answers its next message on the worker
that is left, bounded by the sticky schedule-to-start timeout (docs/recovery.md), not by
the SDK's 10 s default or the workflow task timeout. `bench/bench_recovery.py` gives the
figures; this test proves the mechanism, with a bound generous enough for a loaded CI box."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from pathlib import Path

import yaml
from support import read, start_thread
from temporalio.api.enums.v1 import EventType, TaskQueueKind
from temporalio.client import Client
from worker_process import WorkerProcess, worker_config

from weft.store import Store
from weft.workers.dev_server import DevServer

STICKY_SECONDS = 2.0
# The sticky timeout, then a replay and a model call on a worker that has not run this
# thread before: about 1-3 s on a loaded 2-core machine.
BOUND_SECONDS = STICKY_SECONDS + 6.0  # the SDK's default sticky timeout alone is 10 s


async def answered(store: Store, thread_id: str, turns: int, timeout: float = 60) -> float:
    """Wait until the thread has `turns` turn.completed events; the last one's wall clock."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done = await asyncio.to_thread(store.events.read, thread_id, types=["turn.completed"])
        if len(done) >= turns:
            stamp = done[turns - 1].timestamp.replace("Z", "+00:00")
            return datetime.fromisoformat(stamp).timestamp()
        await asyncio.sleep(0.05)
    raise AssertionError(f"{thread_id} did not complete turn {turns} within {timeout} s")


def with_sticky_timeout(config_file: Path, seconds: float) -> str:
    """Set the workers' sticky timeout in the config file; returns its task queue."""
    config = yaml.safe_load(config_file.read_text())
    config["worker"] = {"stickyScheduleToStartSeconds": seconds}
    config_file.write_text(yaml.safe_dump(config))
    return str(config["temporal"]["taskQueue"])


async def test_killed_workers_thread_answers_on_the_polling_worker(
    tmp_path: Path, dev_server: DevServer, temporal_client: Client
) -> None:
    config = worker_config(tmp_path, dev_server.address)
    queue = with_sticky_timeout(config, STICKY_SECONDS)
    doomed, survivor = WorkerProcess(config), WorkerProcess(config)
    await doomed.start()
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    try:
        handle = await start_thread(
            temporal_client,
            queue,
            agent="crash_agent",
            messages=[{"role": "user", "content": "chat: hello"}],
        )
        await answered(store, handle.id, 1)  # the thread is idle, cached on `doomed`
        await survivor.start()
        # A query is a workflow task on the sticky queue: the doomed worker polls it again
        # just before it dies, so the server still counts it as there and the message's
        # task waits on its queue for the sticky timeout.
        await read(handle)
        killed = time.time()
        await doomed.kill()
        await handle.signal("queue_message", {"role": "user", "content": "chat: still there?"})
        waited = await answered(store, handle.id, 2) - killed
        assert waited < BOUND_SECONDS, f"answered {waited:.1f} s after the kill"
        assert store.messages.list(handle.id)[-1].content == "chatting"

        # The message's workflow task was put on the dead worker's sticky queue, and the
        # survivor ran it.
        history = await handle.fetch_history()
        events = list(history.events)
        signal = max(
            i
            for i, e in enumerate(events)
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
        )
        after = events[signal:]
        scheduled = next(
            e for e in after if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED
        )
        queue_kind = scheduled.workflow_task_scheduled_event_attributes.task_queue.kind
        assert queue_kind == TaskQueueKind.TASK_QUEUE_KIND_STICKY
        started = next(
            e for e in after if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
        )
        identity = started.workflow_task_started_event_attributes.identity
        assert survivor.process is not None
        assert identity.startswith(f"{survivor.process.pid}@"), identity
        timeouts = [
            (e.event_time.ToDatetime() - scheduled.event_time.ToDatetime()).total_seconds()
            for e in after
            if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT
        ]
        # It waited there for the sticky timeout (the worker's, not the SDK's 10 s).
        assert len(timeouts) == 1, timeouts
        assert STICKY_SECONDS - 0.1 < timeouts[0] < STICKY_SECONDS + 1.0, timeouts
    finally:
        store.close()
        await survivor.stop()
        await doomed.stop()
