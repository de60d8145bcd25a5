"""A worker killed with SIGKILL mid-model-call or mid-tool-call loses and duplicates nothing.

Workers run as real `weft worker` subprocesses; the test kills one and starts a fresh one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml
from support import content_of, idle_after, start_thread, wait_until
from temporalio.client import Client, WorkflowHandle
from worker_process import WorkerProcess, until_event, worker_config

from weft.contract.events import Event
from weft.contract.messages import Message
from weft.store import Store
from weft.workers.dev_server import DevServer


@asynccontextmanager
async def _two_workers(
    tmp_path: Path, dev_server: DevServer
) -> AsyncIterator[tuple[str, WorkerProcess, WorkerProcess, Store]]:
    """A running `weft worker` subprocess, a second one ready to start, the task queue and
    the store they share; both are stopped on the way out (the caller closes the store)."""
    config_file = worker_config(tmp_path, dev_server.address)
    task_queue = yaml.safe_load(config_file.read_text())["temporal"]["taskQueue"]
    first, second = WorkerProcess(config_file), WorkerProcess(config_file)
    await first.start()
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    try:
        yield task_queue, first, second, store
    finally:
        await first.stop()
        await second.stop()


async def _kill_and_recover(
    tmp_path: Path, dev_server: DevServer, temporal_client: Client, message: str, kill_on: str
) -> tuple[WorkflowHandle[Any, Any], list[Message], list[Event], Store]:
    async with _two_workers(tmp_path, dev_server) as (task_queue, first, second, store):
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="crash_agent",
            options={"heartbeatTimeoutSeconds": 2},
            messages=[{"role": "user", "content": message}],
        )
        await until_event(store, handle.id, kill_on)
        await first.kill()
        await second.start()
        await wait_until(handle, idle_after(1), timeout=90)
        messages = store.messages.list(handle.id)
        events = store.events.read(handle.id, limit=10_000)
        return handle, messages, events, store


def _assert_no_duplicates(messages):
    assert len({m.id for m in messages}) == len(messages)
    assert len({m.position for m in messages}) == len(messages)


async def test_sigkill_during_model_call(tmp_path, dev_server, temporal_client):
    """Killed mid-stream, the model call is retried on a fresh worker; one reply is stored."""
    handle, messages, events, store = await _kill_and_recover(
        tmp_path, dev_server, temporal_client, "slow model please", kill_on="model.delta"
    )
    try:
        _assert_no_duplicates(messages)
        assert [m.role for m in messages] == ["user", "assistant"]
        assert content_of(messages[1]).startswith("This reply streams slowly")
        resets = [e for e in events if e.type == "model.requested" and e.payload["reset"]]
        assert resets, "the retry did not announce an attempt reset"
    finally:
        store.close()
        await handle.signal("terminate", {})


async def test_sigkill_during_tool_call(tmp_path, dev_server, temporal_client):
    """Killed mid-tool, the tool is retried on a fresh worker; its result is stored once."""
    handle, messages, events, store = await _kill_and_recover(
        tmp_path, dev_server, temporal_client, "slow tool please", kill_on="tool.started"
    )
    try:
        _assert_no_duplicates(messages)
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[2].tool_status == "success"
        assert messages[3].content == "The note is stored."
        started = [e for e in events if e.type == "tool.started"]
        assert [e.payload["attempt"] for e in started] == [1, 2]
        # The killed attempt never finished the tool body, so the effect happened once.
        assert store.values.get(handle.id, "runs") == 1
    finally:
        store.close()
        await handle.signal("terminate", {})


async def test_sigkill_while_a_subagent_works(tmp_path, dev_server, temporal_client):
    """The worker dies while a child thread runs a tool; a fresh worker finishes the tree."""
    async with _two_workers(tmp_path, dev_server) as (task_queue, first, second, store):
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="crash_boss",
            options={"heartbeatTimeoutSeconds": 2},
            messages=[{"role": "user", "content": "delegate"}],
        )
        state = await wait_until(handle, lambda s: bool(s.children), timeout=60)
        reference = state.children[0]["reference"]
        await until_event(store, reference, "tool.started")
        await first.kill()
        await second.start()
        state = await wait_until(handle, idle_after(1), timeout=90)
        assert state.children[0]["status"] == "completed"
        assert state.children[0]["lastResult"] == "child done"
        messages = store.messages.list(handle.id)
        _assert_no_duplicates(messages)
        assert messages[-1].content == "The child finished."
        child_messages = store.messages.list(reference)
        _assert_no_duplicates(child_messages)
        # The killed attempt never finished the child's tool body: its effect happened once.
        assert store.values.get(reference, "runs") == 1
        child = await temporal_client.get_workflow_handle(reference).result()
        assert child["status"] == "cancelled"
        await handle.signal("terminate", {})
    store.close()


async def test_sigkill_during_compaction_leaves_one_boundary(tmp_path, dev_server, temporal_client):
    """A worker killed while the summary streams: the retried compaction on a fresh worker
    writes exactly one boundary, and the thread answers from it afterwards."""
    async with _two_workers(tmp_path, dev_server) as (task_queue, first, second, store):
        handle = await start_thread(
            temporal_client,
            task_queue,
            agent="crash_agent",
            options={"heartbeatTimeoutSeconds": 2},
            messages=[{"role": "user", "content": "chat 1"}],
        )
        await wait_until(handle, idle_after(1), timeout=60)
        await handle.signal("queue_message", {"role": "user", "content": "chat 2"})
        await wait_until(handle, idle_after(2), timeout=60)
        await handle.signal("compact", {"reason": "drill"})
        await until_event(store, handle.id, "context.compaction.started")
        await first.kill()
        await second.start()
        state = await wait_until(
            handle, lambda s: bool(s.context and s.context["compactions"]), timeout=90
        )
        assert state.context is not None and state.context["compactions"] == 1
        (boundary,) = store.boundaries.list(handle.id)
        assert boundary.summary.startswith("Summary: the user chatted")
        kinds = ["context.compaction.started", "context.compaction.completed"]
        events = store.events.read(handle.id, limit=1_000, types=kinds)
        assert [e.type for e in events] == kinds  # the retry's writes were idempotent
        history = await handle.fetch_history()
        scheduled = {
            e.event_id
            for e in history.events
            if e.activity_task_scheduled_event_attributes.activity_type.name == "context.compact"
        }
        attempts = [
            e.activity_task_started_event_attributes.attempt
            for e in history.events
            if e.activity_task_started_event_attributes.scheduled_event_id in scheduled
        ]
        assert attempts == [2], attempts  # the first attempt died with its worker
        await handle.signal("queue_message", {"role": "user", "content": "chat 3"})
        state = await wait_until(handle, idle_after(3), timeout=60)
        assert state.last_outcome == "chatting"
        assert len(store.messages.list(handle.id)) == 6
        store.close()
