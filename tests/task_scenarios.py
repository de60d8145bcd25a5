"""The task scenario whose `TaskRun` histories tests/histories/tasks/ holds.

tests/record_histories.py runs it to record them; tests/test_replay_tasks.py replays them.
One task uses every kind of command a run can take while it waits or runs: held
(`autoStart: false`), linked to a dependency, started, paused while its first attempt
runs, given progress while paused, resumed, and retried after that attempt failed. Its
dependency is a second task, started by command, that tells it when it completed.
A third scenario's task is cancelled through Temporal while its attempt runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from support import add_script, agent_definitions, until

from weft.client.tasks import Tasks
from weft.contract.tasks import TaskRecord
from weft.contract.thread import SIGNAL_TERMINATE
from weft.workers.agent_worker import AgentWorker
from weft.workers.scripted_model import ScriptedModelServer

TASK_COMMANDS = "task_commands"
TASK_TEMPORAL_CANCEL = "task_temporal_cancel"
ANSWER_SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "properties": {"answer": {"type": "integer"}},
}
# The first attempt's reply never comes in time: the attempt ends when its thread is closed
# under it, while the task is paused.
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


@asynccontextmanager
async def _task_worker(
    client: Any, scripted: ScriptedModelServer, config: Any, queue: str, script: str
) -> AsyncIterator[Tasks]:
    """A scenario's own worker (the helper agent on `script`, on its own task queue), and
    the tasks client of its store."""
    async with AgentWorker(
        client, config, definitions=agent_definitions(script), task_queue=queue, scripted=scripted
    ) as worker:
        assert worker.store is not None
        yield Tasks(client, worker.store, task_queue=worker.task_queue)


async def _ended(tasks: Tasks, task_id: str) -> TaskRecord:
    return await asyncio.wait_for(tasks.wait(task_id), timeout=60)


async def drive_task_commands(
    client: Any, scripted: ScriptedModelServer, config: Any, queue: str
) -> dict[str, str]:
    """Run the scenario on its own worker; the recorded tasks' ids by history name
    (`<name>.json` under tests/histories/tasks/), once both have ended."""
    script = add_script(scripted, _SLOW)
    async with _task_worker(client, scripted, config, f"{queue}-{TASK_COMMANDS}", script) as tasks:
        dependency = await tasks.create("Dependency first.", "helper", auto_start=False)
        task = await tasks.create(
            "Answer with JSON.",
            "helper",
            auto_start=False,
            constraints={"maxAttempts": 2},
            acceptance_schema=ANSWER_SCHEMA,
        )
        await tasks.link(task.task_id, dependency.task_id, by="ops", reason="needs it")
        await tasks.start(task.task_id, by="ops")
        await tasks.start(dependency.task_id)
        assert (await _ended(tasks, dependency.task_id)).status == "completed"

        running = await until(
            lambda: (t := tasks.get(task.task_id)).attempts and t, "the first attempt started"
        )
        paused = await tasks.pause(task.task_id, by="ops", reason="hold on")
        assert paused.status == "paused", paused
        scripted.set_script(script, _ANSWERING)
        first = client.get_workflow_handle(running.attempts[0].thread_id)
        await first.signal(SIGNAL_TERMINATE, {"reason": "recorded"})
        await until(
            lambda: tasks.get(task.task_id).attempts[0].status == "failed",
            "the first attempt failed",
        )
        await tasks.append_progress(task.task_id, "waiting for resume")
        await until(lambda: tasks.get(task.task_id).progress, "the progress is recorded")
        await tasks.resume(task.task_id, by="ops")
        done = await _ended(tasks, task.task_id)
        assert done.status == "completed", done
        assert [a.status for a in done.attempts] == ["failed", "completed"], done.attempts
    return {
        f"{TASK_COMMANDS}_task": task.task_id,
        f"{TASK_COMMANDS}_dependency": dependency.task_id,
    }


async def drive_task_temporal_cancel(
    client: Any, scripted: ScriptedModelServer, config: Any, queue: str
) -> dict[str, str]:
    """A task whose run is cancelled through Temporal while its attempt runs: the run
    writes its own end and returns (patch `task-temporal-cancel-v1`)."""
    script = add_script(scripted, _SLOW)
    queue = f"{queue}-{TASK_TEMPORAL_CANCEL}"
    async with _task_worker(client, scripted, config, queue, script) as tasks:
        task = await tasks.create("Answer with JSON.", "helper")
        await until(lambda: tasks.get(task.task_id).attempts, "the first attempt started")
        await client.get_workflow_handle(task.task_id).cancel(reason="recorded")
        done = await _ended(tasks, task.task_id)
        assert done.status == "cancelled", done
    return {TASK_TEMPORAL_CANCEL: task.task_id}
