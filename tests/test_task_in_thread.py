"""A task run as turns of a given thread (`runIn.threadId`, docs/tasks.md), on the dev
server with the scripted model: each attempt is a new turn of that thread, the task never
starts or closes a thread, and a thread that is unknown, closed, another tenant's or of
another agent is refused at create, naming the field."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
import yaml
from api_support import api_stack
from support import (
    StartWorker,
    add_script,
    agent_definitions,
    event_schema_validator,
    patch_markers,
    start_thread,
    store_of,
    until,
    weft_cli,
)
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.worker import Replayer

from weft.client.tasks import TaskError, Tasks
from weft.contract.tasks import TaskRecord
from weft.contract.thread import SIGNAL_TERMINATE
from weft.transport.codec import data_converter
from weft.workers.agent_worker import AgentWorker
from weft.workers.scripted_model import ScriptedModelServer
from weft.workers.workflow_runner import workflow_runner
from weft.workflows.tasks.task_attempts import RUN_IN_THREAD_PATCH
from weft.workflows.tasks.task_run import TaskRunWorkflow

ANSWER_SCHEMA = {
    "type": "object",
    "required": ["answer"],
    "properties": {"answer": {"type": "integer"}},
}


async def _worker(
    start_worker: StartWorker, client: Client, server: ScriptedModelServer, script: dict[str, Any]
) -> tuple[AgentWorker, Tasks]:
    worker = await start_worker(agent_definitions(add_script(server, script)))
    return worker, Tasks(client, store_of(worker), task_queue=worker.task_queue)


async def _thread(client: Client, worker: AgentWorker, **fields: Any) -> WorkflowHandle[Any, Any]:
    """A running thread of `helper` whose row is stored (what create checks)."""
    handle = await start_thread(client, worker.task_queue, **fields)
    store = store_of(worker)
    await until(lambda: store.threads.get(handle.id), "the thread's row is stored")
    return handle


async def _ended(tasks: Tasks, task_id: str) -> TaskRecord:
    return await asyncio.wait_for(tasks.wait(task_id), timeout=30)


def _transcript(worker: AgentWorker, thread_id: str) -> list[tuple[str, str | None]]:
    messages = store_of(worker).messages.list(thread_id, depth=0)
    return [(m.role, m.content if isinstance(m.content, str) else None) for m in messages]


async def _replays(client: Client, task_id: str) -> None:
    """Every run of the task's workflow replays on today's code, and asked the patch."""
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
        assert RUN_IN_THREAD_PATCH in [patch for _, patch in patch_markers(history)]
        await replayer.replay_workflow(history)


async def test_task_runs_as_a_turn_of_the_given_thread(
    start_worker, temporal_client, scripted_server
):
    """The task completes with the turn's answer; the thread's transcript holds the
    objective and the answer, the attempt names the thread, and the thread stays open."""
    worker, tasks = await _worker(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "Done."}]}
    )
    thread = await _thread(temporal_client, worker)
    created = await tasks.create("Say done.", "helper", in_thread=thread.id)
    assert created.run_in is not None and created.run_in.thread_id == thread.id
    done = await _ended(tasks, created.task_id)
    assert done.status == "completed" and done.output is not None
    assert done.output.response == "Done." and done.output.thread_id == thread.id
    [attempt] = done.attempts
    assert attempt.thread_id == thread.id and attempt.turn_id is not None
    assert _transcript(worker, thread.id)[-2:] == [("user", "Say done."), ("assistant", "Done.")]
    validator = event_schema_validator()
    for event in tasks.events(created.task_id):
        validator.validate(event.to_wire())
    started = [e for e in tasks.events(created.task_id) if e.type == "task.attempt.started"]
    assert started[0].payload["attempt"]["threadId"] == thread.id
    assert (await thread.describe()).status == WorkflowExecutionStatus.RUNNING
    # No thread of its own was started for the attempt.
    assert store_of(worker).threads.get(f"{created.task_id}-a1") is None
    await _replays(temporal_client, created.task_id)
    # Deleting the task with its threads leaves the thread it ran in: it is not the task's.
    report = await tasks.delete(created.task_id, with_threads=True, audit_as=None)
    assert report.threads == [] and store_of(worker).threads.get(thread.id) is not None
    assert (await thread.describe()).status == WorkflowExecutionStatus.RUNNING
    await thread.signal(SIGNAL_TERMINATE, {})


async def test_a_failed_attempt_is_retried_as_a_second_turn(
    start_worker, temporal_client, scripted_server
):
    """An answer that fails the acceptance schema fails the task; its retry is a second
    turn of the same thread (a new run, asking the patch again), whose answer completes
    the task; the thread stays open throughout."""
    script = add_script(scripted_server, {"replies": [{"text": "no idea"}]})
    worker = await start_worker(agent_definitions(script))
    tasks = Tasks(temporal_client, store_of(worker), task_queue=worker.task_queue)
    thread = await _thread(temporal_client, worker)
    created = await tasks.create(
        "Answer.", "helper", in_thread=thread.id, acceptance_schema=ANSWER_SCHEMA
    )
    failed = await _ended(tasks, created.task_id)
    assert failed.status == "failed" and "not JSON" in (failed.attempts[0].error or "")
    assert (await thread.describe()).status == WorkflowExecutionStatus.RUNNING
    scripted_server.set_script(script, {"replies": [{"text": '{"answer": 42}'}]})
    await tasks.retry(created.task_id, "try again")
    done = await _ended(tasks, created.task_id)
    assert done.status == "completed" and done.output is not None
    assert done.output.structured == {"answer": 42}
    first, second = done.attempts
    assert first.thread_id == second.thread_id == thread.id
    assert first.turn_id != second.turn_id and first.run_id != second.run_id
    assert _transcript(worker, thread.id)[-4:] == [
        ("user", "Answer."),
        ("assistant", "no idea"),
        ("user", "Answer."),
        ("assistant", '{"answer": 42}'),
    ]
    assert (await thread.describe()).status == WorkflowExecutionStatus.RUNNING
    await _replays(temporal_client, created.task_id)
    await thread.signal(SIGNAL_TERMINATE, {})


async def test_cancel_leaves_the_given_thread_open(start_worker, temporal_client, scripted_server):
    """Cancelling a task whose attempt is a turn of a given thread ends the attempt
    `cancelled` and leaves the thread running."""
    script = {"replies": [{"text": "late", "delay_ms": 60_000}]}
    worker, tasks = await _worker(start_worker, temporal_client, scripted_server, script)
    thread = await _thread(temporal_client, worker)
    created = await tasks.create("Take your time.", "helper", in_thread=thread.id)
    running = await until(
        lambda: (t := tasks.get(created.task_id)).attempts and t, "the attempt started"
    )
    assert tasks.snapshot().current_attempts[created.task_id].thread_id == thread.id
    await tasks.cancel(created.task_id, "no longer needed")
    done = await _ended(tasks, created.task_id)
    assert done.status == "cancelled" and done.attempts[0].status == "cancelled"
    assert running.attempts[0].thread_id == thread.id
    assert (await thread.describe()).status == WorkflowExecutionStatus.RUNNING
    # A task run in a thread is delegated to no other agent (the thread's is its assignee).
    held = await tasks.create("Later.", "helper", in_thread=thread.id, auto_start=False)
    with pytest.raises(TaskError) as refused:
        await tasks.delegate(held.task_id, "someone-else")
    assert refused.value.field == "to"
    await tasks.cancel(held.task_id)
    await thread.signal(SIGNAL_TERMINATE, {})
    await asyncio.wait_for(thread.result(), timeout=30)


async def test_bad_threads_are_refused_naming_the_field(
    start_worker, scripted_server, temporal_client, weft_config
):
    """An unknown thread, a closed one, another tenant's (worded as unknown, from Python
    and over HTTP with a tenant's key) and one of another agent are refused at create,
    naming the field; nothing is stored for a refused task."""
    worker, tasks = await _worker(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "ok"}]}
    )
    store = store_of(worker)
    before = len(tasks.list())

    with pytest.raises(TaskError, match="runIn.threadId: no thread 'thread-nope'") as unknown:
        await tasks.create("x", "helper", in_thread="thread-nope")
    assert unknown.value.field == "runIn.threadId"

    closed = await _thread(temporal_client, worker)
    await closed.signal(SIGNAL_TERMINATE, {})
    await asyncio.wait_for(closed.result(), timeout=30)
    with pytest.raises(TaskError, match="is completed: a task runs only in a running") as shut:
        await tasks.create("x", "helper", in_thread=closed.id)
    assert shut.value.field == "runIn.threadId"

    acme, globex = (f"{n}-{uuid.uuid4().hex[:6]}" for n in ("acme", "globex"))
    theirs = await _thread(temporal_client, worker, tenant=acme)
    with pytest.raises(TaskError, match=f"runIn.threadId: no thread '{theirs.id}'") as other:
        await tasks.create("x", "helper", in_thread=theirs.id, tenant=globex)
    assert other.value.field == "runIn.threadId"

    with pytest.raises(TaskError, match="is not the agent of thread") as agent:
        await tasks.create("x", "writer", in_thread=theirs.id, tenant=acme)
    assert agent.value.field == "assignee"
    assert len(tasks.list()) == before

    # None given, the task is its thread's tenant's.
    held = await tasks.create("x", "helper", in_thread=theirs.id, auto_start=False)
    assert held.scope.tenant == acme and store.tasks.tenant(held.task_id) == acme
    await tasks.cancel(held.task_id)

    async with api_stack(temporal_client, weft_config, worker.task_queue, store=store) as stack:
        key = stack.store.api_keys.create(globex, ["tasks:read", "tasks:write"]).secret
        body = {"objective": "x", "assignee": "helper", "runIn": {"threadId": theirs.id}}
        async with httpx.AsyncClient(
            timeout=60, base_url=stack.url, headers={"Authorization": f"Bearer {key}"}
        ) as http:
            reply = await http.post("/tasks", json=body)
        assert reply.status_code == 422, reply.text
        assert reply.json()["fields"] == ["runIn.threadId"]
        assert f"no thread '{theirs.id}'" in reply.text
    await theirs.signal(SIGNAL_TERMINATE, {})


async def test_cli_runs_a_task_in_a_thread(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`weft task create AGENT OBJECTIVE --in-thread ID`: the task runs as a turn of that
    thread; an unknown thread is one `weft:` line naming the field."""
    worker, _ = await _worker(
        start_worker, temporal_client, scripted_server, {"replies": [{"text": "Done."}]}
    )
    config = tmp_path / "cli.yml"
    temporal = {"address": weft_config.temporal.address, "taskQueue": worker.task_queue}
    config.write_text(
        yaml.safe_dump({"temporal": temporal, "store": {"url": weft_config.store_url()}})
    )
    thread = await _thread(temporal_client, worker)
    code, out, err = await weft_cli(
        config, "task", "create", "helper", "Say done.", "--in-thread", thread.id, "--wait"
    )
    assert code == 0, err
    done = json.loads(out)
    assert done["status"] == "completed" and done["runIn"] == {"threadId": thread.id}
    assert done["attempts"][0]["threadId"] == thread.id
    assert (await thread.describe()).status == WorkflowExecutionStatus.RUNNING
    code, _, err = await weft_cli(
        config, "task", "create", "helper", "x", "--in-thread", "thread-nope"
    )
    assert code != 0 and "runIn.threadId: no thread 'thread-nope'" in err, err
    await thread.signal(SIGNAL_TERMINATE, {})
