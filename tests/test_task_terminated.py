"""A task whose `TaskRun` is terminated through Temporal (not `cancel`) writes no end of its
own: the readers that ask Temporal (`Tasks.show`, `list_checked`, `wait`, GET /tasks and
/tasks/{id}, `weft task get|wait|list`) and the commands that find the run gone record the
end Temporal states, once, with the running attempt's end, and close the attempt's thread;
`cancel` then says the task has ended, and `retry` runs it again as a failed task.
A run cancelled through Temporal (not terminated) writes its own end, as `cancel` does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from api_support import api_stack, get_until
from support import (
    StartWorker,
    add_script,
    agent_definitions,
    assert_terminated_through_temporal,
    event_schema_validator,
    store_of,
    until,
    weft_cli,
)
from temporalio.client import Client, WorkflowExecutionStatus

from weft.client.tasks import TaskError, Tasks
from weft.contract.tasks import TaskRecord
from weft.store import Store
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

_ENDS = ("task.completed", "task.failed", "task.cancelled", "task.timed_out")
_SLOW = {"replies": [{"text": "late", "delay_ms": 60_000}]}


def _log(tasks: Tasks, task_id: str) -> list[dict[str, Any]]:
    """The task's events, each checked against the vendored event schema."""
    validator = event_schema_validator()
    events = [e.to_wire() for e in tasks.events(task_id)]
    for event in events:
        validator.validate(event)
    return events


def _ends(tasks: Tasks, task_id: str) -> list[dict[str, Any]]:
    return [e for e in _log(tasks, task_id) if e["type"] in _ENDS]


async def _running_attempt(tasks: Tasks, store: Store, task_id: str) -> TaskRecord:
    """The task once its attempt's thread has started (its row is stored)."""
    record: TaskRecord = await until(
        lambda: (t := tasks.get(task_id)).attempts and t.status == "running" and t,
        "the attempt starts",
    )
    thread_id = record.attempts[0].thread_id
    await until(lambda: store.threads.get(thread_id), "the attempt's thread runs")
    return record


async def _thread_closed(client: Client, thread_id: str) -> None:
    """The attempt's thread ends by its own soft terminate (a completed run, not a
    terminated one)."""
    handle = client.get_workflow_handle(thread_id)
    await asyncio.wait_for(handle.result(), timeout=60)
    assert (await handle.describe()).status == WorkflowExecutionStatus.COMPLETED


async def test_a_task_terminated_through_temporal_ends_failed_once_and_retries(
    start_worker: StartWorker,
    temporal_client: Client,
    weft_config: WeftConfig,
    scripted_server: ScriptedModelServer,
) -> None:
    """Two tasks on a slow model, each terminated through Temporal while its attempt
    runs: one read by `show`, the other listed by GET /tasks. Each is then `failed` with
    Temporal's reason, its attempt `failed`, its attempt thread closed, in `show`, `wait`,
    `list_checked` and both routes, with one `task.failed` however often it is read.
    Cancel answers that it has ended; retry runs a new attempt to completion."""
    name = add_script(scripted_server, _SLOW)
    worker = await start_worker(agent_definitions(name))
    store = store_of(worker)
    tasks = Tasks(temporal_client, store, task_queue=worker.task_queue)
    shown = (await tasks.create("Work slowly.", "helper")).task_id
    listed = (await tasks.create("Work slowly too.", "helper")).task_id
    for task_id in (shown, listed):
        await _running_attempt(tasks, store, task_id)
        await temporal_client.get_workflow_handle(task_id).terminate(reason="stuck on a deploy")
    assert tasks.get(shown).status == "running"  # the run wrote nothing: the store can't know

    first = await tasks.show(shown)
    assert_terminated_through_temporal(first, "stuck on a deploy")
    [attempt] = first.attempts
    assert attempt.status == "failed" and attempt.error == first.reason, attempt
    assert first.delivery.state == "none"
    async with api_stack(temporal_client, weft_config, worker.task_queue, store=store) as stack:
        listing = await get_until(
            stack.http, "/tasks", lambda page: any(t["taskId"] == listed for t in page["failed"])
        )
        failed = {t["taskId"]: t for t in listing["failed"]}
        assert "stuck on a deploy" in failed[listed]["reason"], listing
        assert listed not in listing["currentAttempts"]
        one = await stack.http.get(f"/tasks/{shown}")
        assert one.status_code == 200 and one.json()["status"] == "failed", one.text
        refused = await stack.http.post(f"/tasks/{shown}/cancel", json={})
        assert refused.status_code == 409 and "it is failed" in refused.text, refused.text
    assert (await asyncio.wait_for(tasks.wait(shown), timeout=60)).status == "failed"
    assert (await tasks.show(shown)).status == "failed"
    checked = await tasks.list_checked()
    assert {t.task_id: t.status for t in checked if t.task_id in (shown, listed)} == {
        shown: "failed",
        listed: "failed",
    }
    for task_id in (shown, listed):
        ends = _ends(tasks, task_id)
        assert [e["type"] for e in ends] == ["task.failed"], ends
        payload = ends[0]["payload"]
        assert payload["closedAs"] == "terminated" and "stuck on a deploy" in payload["reason"]
        attempt_ends = [e for e in _log(tasks, task_id) if e["type"] == "task.attempt.failed"]
        assert len(attempt_ends) == 1, attempt_ends
        # The log alone says the same as the row.
        assert store.tasks.rebuild(task_id) == tasks.get(task_id)
        await _thread_closed(temporal_client, tasks.get(task_id).attempts[0].thread_id)

    await _refused_cancel(tasks, shown)

    scripted_server.set_script(name, {"replies": [{"text": "Done."}]})
    await tasks.retry(shown, "the deploy is over")
    done = await asyncio.wait_for(tasks.wait(shown), timeout=60)
    assert done.status == "completed", done
    assert [a.status for a in done.attempts] == ["failed", "completed"]
    assert [e["type"] for e in _ends(tasks, shown)] == ["task.failed", "task.completed"]


async def _refused_cancel(tasks: Tasks, task_id: str) -> None:
    with pytest.raises(TaskError, match=f"cannot cancel task {task_id}: it is failed") as err:
        await tasks.cancel(task_id)
    assert err.value.field is None


async def test_a_command_on_a_terminated_task_records_its_end(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """`cancel` of a task whose run was terminated (the store still saying it runs) finds
    the run gone: the end is recorded and the cancel refused, naming it."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, _SLOW)))
    store = store_of(worker)
    tasks = Tasks(temporal_client, store, task_queue=worker.task_queue)
    terminated = (await tasks.create("Work slowly.", "helper")).task_id
    await _running_attempt(tasks, store, terminated)
    await temporal_client.get_workflow_handle(terminated).terminate(reason="by hand")
    with pytest.raises(TaskError, match=r"it is failed \(its run was terminated .*by hand\)"):
        await tasks.cancel(terminated, "stop")
    assert [e["type"] for e in _ends(tasks, terminated)] == ["task.failed"]


async def test_a_task_cancelled_through_temporal_ends_itself_and_closes_its_thread(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> None:
    """A run cancelled through Temporal (its UI's Cancel) ends as `cancel` ends it: its
    own `task.cancel_requested`, the attempt's end and `task.cancelled` with Temporal's
    reason, its attempt's thread closed at once (no reader asks first), and the run returns
    its record (a job's item would record the task's end)."""
    worker = await start_worker(agent_definitions(add_script(scripted_server, _SLOW)))
    store = store_of(worker)
    tasks = Tasks(temporal_client, store, task_queue=worker.task_queue)
    task_id = (await tasks.create("Work slowly.", "helper")).task_id
    running = await _running_attempt(tasks, store, task_id)
    run = temporal_client.get_workflow_handle(task_id)
    await run.cancel(reason="not needed")
    await _thread_closed(temporal_client, running.attempts[0].thread_id)
    returned = TaskRecord.model_validate(await asyncio.wait_for(run.result(), timeout=60))
    assert returned.status == "cancelled", returned
    reason = "its run was cancelled through Temporal: not needed"
    assert returned.reason == reason and returned.attempts[0].status == "cancelled"
    assert (await run.describe()).status == WorkflowExecutionStatus.COMPLETED
    ends = [e["type"] for e in _log(tasks, task_id)][-3:]
    assert ends == ["task.cancel_requested", "task.attempt.failed", "task.cancelled"]
    ended = await asyncio.wait_for(tasks.wait(task_id), timeout=60)
    assert ended.status == "cancelled" and ended.reason == reason
    assert [e["type"] for e in _ends(tasks, task_id)] == ["task.cancelled"]


async def test_the_cli_reads_a_terminated_task(
    start_worker: StartWorker,
    temporal_client: Client,
    weft_config: WeftConfig,
    scripted_server: ScriptedModelServer,
    tmp_path: Path,
) -> None:
    """`weft task get` records the end of a task terminated through Temporal, `wait`
    prints it, `cancel` is one `weft:` line saying it has ended, `retry` runs it again."""
    name = add_script(scripted_server, _SLOW)
    worker = await start_worker(agent_definitions(name))
    store = store_of(worker)
    tasks = Tasks(temporal_client, store, task_queue=worker.task_queue)
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    task_id = (await tasks.create("Work slowly.", "helper")).task_id
    await _running_attempt(tasks, store, task_id)
    await temporal_client.get_workflow_handle(task_id).terminate(reason="by hand")

    code, out, err = await weft_cli(config, "task", "get", task_id)
    assert code == 0 and json.loads(out)["status"] == "failed", err
    code, out, err = await weft_cli(config, "task", "wait", task_id)
    assert code == 0 and "by hand" in json.loads(out)["reason"], err
    code, out, err = await weft_cli(config, "task", "cancel", task_id)
    assert code == 1 and err.startswith(f"weft: cannot cancel task {task_id}: it is failed"), err
    scripted_server.set_script(name, {"replies": [{"text": "Done."}]})
    code, out, err = await weft_cli(config, "task", "retry", task_id)
    assert code == 0 and f"retrying {task_id}" in out, err
    code, out, err = await weft_cli(config, "task", "wait", task_id)
    assert code == 0 and json.loads(out)["status"] == "completed", err
    assert [e["type"] for e in _ends(tasks, task_id)] == ["task.failed", "task.completed"]
