"""Drill: an effect's timer survives its worker being killed; it fires on a fresh worker."""

from __future__ import annotations

import asyncio

from support import idle_after, start_thread, wait_until
from worker_process import crash_drill, worker_config

from weft.contract.effects import UPDATE_SCHEDULE_EFFECT_CHECKED, ScheduleEffectResult


async def test_effect_fires_after_the_worker_was_killed_and_restarted(
    tmp_path, dev_server, temporal_client
):
    """Scheduled for 2 s, then SIGKILL; the timer lives in Temporal, so a worker started
    after the due time runs the effect once and its message starts a turn."""
    config_file = worker_config(tmp_path, dev_server.address)
    async with crash_drill(config_file) as (task_queue, first, second, store):
        handle = await start_thread(temporal_client, task_queue, agent="crash_agent")
        await wait_until(handle, idle_after(0), timeout=60)
        scheduled = await handle.execute_update(
            UPDATE_SCHEDULE_EFFECT_CHECKED,
            {"name": "wake_up", "args": {"text": "wake up, the worker restarted"}, "delayMs": 2000},
            result_type=ScheduleEffectResult,
        )
        await first.kill()
        await asyncio.sleep(2.5)  # the effect falls due while no worker runs
        assert store.events.read(handle.id, types=["job.started"]) == []
        await second.start()
        state = await wait_until(handle, idle_after(1), timeout=90)
        assert state.scheduled_effects == []
        messages = store.messages.list(handle.id)
        assert [(m.role, m.content) for m in messages] == [
            ("user", "wake up, the worker restarted"),
            ("assistant", "Awake after the restart."),
        ]
        assert store.values.get(handle.id, "wake_runs") == 1
        [done] = store.events.read(handle.id, types=["job.completed"])
        assert done.payload["effect"]["id"] == scheduled.id
        assert done.payload["result"] == "woke 1"
        await handle.signal("terminate", {})
