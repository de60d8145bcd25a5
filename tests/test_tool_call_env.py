"""`tool.call` runs every call through the Env it is given (activities/env.py), in-process
(ActivityEnvironment) over a real SQLite store: what the Env answers is what is stored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from env_doubles import CannedTools
from support import agent_definitions
from temporalio.testing import ActivityEnvironment

from weft.activities.env import Dispatched
from weft.activities.snapshots import SnapshotCache
from weft.activities.tool_call import ToolActivities
from weft.contract.activities import ToolCallInput, ToolResult
from weft.contract.messages import ToolCall, ToolCallFunction
from weft.store import Store, ThreadRow


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    store.threads.upsert(
        ThreadRow(thread_id="t1", agent="helper", status="running", created_at=datetime.now(UTC))
    )
    try:
        yield store
    finally:
        store.close()


async def test_the_env_answers_the_call_and_its_answer_is_stored(store: Store) -> None:
    """A call to the thread's own `weather` tool goes to the Env, not to the worker's tool:
    the Env's result is the stored tool message, with the call's ids and a `tool.result`."""
    definitions = agent_definitions("unused")
    snapshot = definitions.snapshot("helper")
    cache = SnapshotCache(store)
    cache.remember(snapshot)
    env = CannedTools(Dispatched(ToolResult(status="success", result={"from": "env"})))
    tools = ToolActivities(store, definitions, cache, env=env)
    call = ToolCallInput(
        thread_id="t1",
        snapshot_id=snapshot.snapshot_id,
        side="a",
        turn_id="turn1",
        step_id="step1",
        tool_call=ToolCall(
            id="call1", function=ToolCallFunction(name="weather", arguments='{"city": "Oslo"}')
        ),
        result_message_id="msg1",
        result_position=1,
    )
    result = await ActivityEnvironment().run(tools.call_tool, call)
    [request] = env.requests
    assert (request.name, request.call.result_message_id) == ("weather", "msg1")
    assert request.state.thread_id == "t1"
    assert json.loads(result.message.content or "") == {
        "status": "success",
        "result": {"from": "env"},
    }
    [stored] = store.messages.list("t1")
    assert (stored.id, stored.tool_call_id, stored.tool_status) == ("msg1", "call1", "success")
    [done] = store.events.read("t1", types=["tool.result"])
    assert done.payload["messageId"] == "msg1"
