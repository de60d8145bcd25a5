"""The MCP activities in-process (ActivityEnvironment) on a real SQLite store, against the
real test MCP server over stdio: `tool.catalog` records its catalogues once and turns a
failed server into data; `tool.call` with `mcp` runs MCP tools like function tools."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp_support import stdio_server
from support import agent_definitions, event_schema_validator
from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import ActivityEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

from weft.activities.mcp.catalog_activity import CatalogActivities
from weft.activities.mcp.catalog_store import CatalogStore
from weft.activities.mcp.pool import McpSessionPool
from weft.activities.snapshots import SnapshotCache
from weft.activities.spans import Spans
from weft.activities.tool_call import ToolActivities
from weft.contract.activities import ToolCallInput, ToolCallResult
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.mcp import (
    QUERY_MCP_ELICITATION,
    SIGNAL_MCP_ELICITATION,
    McpToolTarget,
    ToolCatalogInput,
    ToolCatalogResult,
)
from weft.contract.messages import ToolCall, ToolCallFunction
from weft.store import Store, ThreadRow
from weft.workers.agent_worker import tool_env

SECRET = "s3cret-value-42"


class Rig:
    """A store, one snapshot whose prompt uses the `tools` and `down` servers, and the
    two activity classes sharing one session pool."""

    def __init__(self, store: Store, snapshot: DefinitionSnapshot, pool: McpSessionPool) -> None:
        self.store = store
        self.snapshot = snapshot
        cache = SnapshotCache(store)
        cache.remember(snapshot)
        self.catalogs = CatalogStore(store)
        self.catalog = CatalogActivities(store, cache, pool, catalogs=self.catalogs)
        definitions = agent_definitions("unused")
        env = tool_env(store, definitions, pool, spans=Spans())
        self.tools = ToolActivities(store, definitions, cache, env=env)

    async def list(self, thread_id: str, *servers: str, event_id: str) -> ToolCatalogResult:
        job = ToolCatalogInput(
            thread_id=thread_id,
            snapshot_id=self.snapshot.snapshot_id,
            servers=list(servers),
            reason="prompt_active",
            turn_id="turn1",
            step_id="step1",
            event_id=event_id,
        )
        return await ActivityEnvironment().run(self.catalog.resolve_catalog, job)

    async def call(
        self,
        thread_id: str,
        tool: str,
        arguments: str,
        *,
        server: str = "tools",
        n: int = 1,
        environment: ActivityEnvironment | None = None,
    ) -> ToolCallResult:
        call = ToolCallInput(
            thread_id=thread_id,
            snapshot_id=self.snapshot.snapshot_id,
            side="a",
            turn_id="turn1",
            step_id=f"step{n}",
            tool_call=ToolCall(
                id=f"call{n}", function=ToolCallFunction(name=f"mcp_{tool}", arguments=arguments)
            ),
            result_message_id=f"msg{n}",
            result_position=n,
            mcp=McpToolTarget(server=server, tool=tool),
        )
        return await (environment or ActivityEnvironment()).run(self.tools.call_tool, call)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    tools = stdio_server(
        "tools",
        env={"TOKEN": "${TOKEN}"},
        prefix="mcp_",
        deny=["slow"],
        elicitation_timeout_seconds=30,
    )
    down = stdio_server("down", args=["--mode", "exit"], startup_timeout_seconds=5)
    # A server that cannot start, its command line holding the thread's secret.
    leaky = stdio_server("leaky", args=["--mode", "exit", "${TOKEN}"], startup_timeout_seconds=5)
    weather = stdio_server("clash")  # its `weather` tool meets the thread's own
    definitions = agent_definitions(
        "unused",
        tools=["weather", {"mcp": "tools"}, {"mcp": "down"}, {"mcp": "leaky"}, "clash.weather"],
    ).add(tools, down, leaky, weather)
    store = Store.open(f"sqlite:///{tmp_path / 'weft.db'}")
    for thread_id in ("t1", "t2", "t3"):
        store.threads.upsert(
            ThreadRow(
                thread_id=thread_id,
                agent="helper",
                status="running",
                created_at=datetime.now(UTC),
                env={"TOKEN": SECRET},  # typed secret by default
            )
        )
    pool = McpSessionPool()
    try:
        yield Rig(store, definitions.snapshot("helper"), pool)
    finally:
        await pool.aclose()
        store.close()


def _content(result: ToolCallResult) -> dict[str, Any]:
    content: dict[str, Any] = json.loads(result.message.content or "{}")
    return content


async def test_the_catalogue_is_recorded_once_even_when_run_twice(rig: Rig) -> None:
    """A second run with the same event id writes nothing more and returns what the first
    recorded; the catalogue is in the store by its id, with the prefix and filter applied."""
    first = await rig.list("t1", "tools", "clash", event_id="evt_cat1")
    again = await rig.list("t1", "tools", "clash", event_id="evt_cat1")
    assert again == first
    tools = first.servers["tools"]
    names = [t.name for t in tools.tools]
    assert tools.status == "ready" and "mcp_add" in names and "mcp_slow" not in names
    assert rig.catalogs.load(tools.catalog_id) == tools
    [resolved] = rig.store.events.read("t1", types=["tool.catalog.resolved"])
    assert resolved.event_id == "evt_cat1"
    entry = resolved.payload["servers"]["tools"]
    assert resolved.payload["reason"] == "prompt_active"
    assert (entry["status"], entry["catalogId"], entry["digest"], entry["tools"]) == (
        "ready",
        tools.catalog_id,
        tools.digest,
        names,
    )
    # The server's `weather` would take the thread's own tool's name: skipped, once.
    clash = first.servers["clash"]
    assert "weather" not in [t.name for t in clash.tools] and "add" in [t.name for t in clash.tools]
    [skipped] = rig.store.events.read("t1", types=["runtime.warning"])
    assert skipped.payload["code"] == "mcp_tool_skipped"
    assert "MCP server 'clash': tool 'weather' skipped" in skipped.payload["message"]
    assert resolved.payload["servers"]["clash"]["warnings"] == [skipped.payload["message"]]


async def test_a_server_that_will_not_start_is_a_failed_catalogue_and_a_warning(rig: Rig) -> None:
    """A server that exits at start-up, and one the snapshot does not define, come back as
    failed catalogues naming the server, each with a `runtime.warning`; the others list."""
    result = await rig.list("t2", "down", "nowhere", "tools", event_id="evt_cat2")
    down, nowhere = result.servers["down"], result.servers["nowhere"]
    assert (down.status, down.tools) == ("failed", [])
    assert down.error is not None and "'down'" in down.error
    assert nowhere.status == "failed" and "'nowhere' is not defined" in (nowhere.error or "")
    assert result.servers["tools"].status == "ready"
    warnings = rig.store.events.read("t2", types=["runtime.warning"])
    assert [(w.payload["code"], w.payload["server"]) for w in warnings] == [
        ("mcp_server_unavailable", "down"),
        ("mcp_server_unavailable", "nowhere"),
    ]
    [resolved] = rig.store.events.read("t2", types=["tool.catalog.resolved"])
    assert resolved.payload["servers"]["down"]["error"] == down.error


async def test_tool_call_runs_an_mcp_tool_and_stores_the_tool_message(rig: Rig) -> None:
    """`tool.call` with `mcp` calls the server's tool under its own name, stores the result
    as the tool message with its events, and reports no list change."""
    result = await rig.call("t3", "add", json.dumps({"a": 2, "b": 3}))
    assert _content(result) == {"status": "success", "result": "5"}
    assert result.mcp is None and result.message.name == "mcp_add"
    [stored] = rig.store.messages.list("t3")
    assert (stored.id, stored.role, stored.tool_call_id, stored.tool_status) == (
        "msg1",
        "tool",
        "call1",
        "success",
    )
    kinds = [e.type for e in rig.store.events.read("t3", types=["tool.started", "tool.result"])]
    assert kinds == ["tool.started", "tool.result"]


async def test_an_mcp_is_error_result_is_an_error_tool_result(rig: Rig) -> None:
    """A tool that answers isError becomes an error tool result with its text, stored with
    `tool.failed`; the activity itself succeeds."""
    result = await rig.call("t3", "fail", json.dumps({"message": "no luck"}))
    content = _content(result)
    assert content["status"] == "error" and "no luck" in content["error"]
    assert content["error_code"] == "mcp_tool_error"
    [failed] = rig.store.events.read("t3", types=["tool.failed"])
    assert failed.payload["errorCode"] == "mcp_tool_error"


async def test_bad_calls_are_error_results_before_any_server_is_reached(rig: Rig) -> None:
    """Arguments that are not JSON, and a server the snapshot lacks, are error results
    (invalid_arguments, unknown_tool) naming the tool."""
    bad_json = await rig.call("t3", "add", "{not json", n=1)
    unknown = await rig.call("t3", "add", "{}", server="elsewhere", n=2)
    assert _content(bad_json)["error_code"] == "invalid_arguments"
    assert _content(unknown)["error_code"] == "unknown_tool"
    assert "'elsewhere'" in _content(unknown)["error"]


async def test_a_masked_secret_is_recorded_as_output_redacted(rig: Rig) -> None:
    """A server that will not start and quotes the thread's secret in its error: the tool
    result shows the mask, never the value, and `output.redacted` counts the masks."""
    result = await rig.call("t3", "add", json.dumps({"a": 1, "b": 2}), server="leaky")
    content = _content(result)
    assert content["error_code"] == "mcp_server_unavailable", content
    assert SECRET not in (result.message.content or "") and "[redacted secret]" in content["error"]
    [redacted] = rig.store.events.read("t3", types=["output.redacted"])
    assert redacted.tool_call_id == "call1" and redacted.payload["field"] == "error"
    assert redacted.payload["occurrences"] == content["error"].count("[redacted secret]")
    assert SECRET not in json.dumps(redacted.to_wire())
    event_schema_validator().validate(redacted.to_wire())


async def test_the_threads_secret_env_reaches_the_server(rig: Rig) -> None:
    """`${TOKEN}` in the server's env is the thread row's secret value (sessions are opened
    with the env the tool's ThreadState has)."""
    result = await rig.call("t3", "env", json.dumps({"name": "TOKEN"}))
    assert _content(result) == {"status": "success", "result": SECRET}


async def test_a_list_changed_call_returns_the_new_digest(rig: Rig) -> None:
    """A call after which the server reports `list_changed` returns the digest of its new
    (filtered) tool list, which differs from the catalogue's."""
    listed = await rig.list("t3", "tools", event_id="evt_cat3")
    result = await rig.call("t3", "add_tool", json.dumps({"name": "extra"}))
    assert _content(result)["status"] == "success"
    assert result.mcp is not None and result.mcp.server == "tools"
    assert result.mcp.digest not in (None, listed.servers["tools"].digest)


@workflow.defn(name="ElicitationAnswering")
class AnsweringWorkflow:
    """Stands in for the thread: takes `mcp_elicitation`, answers a moment later."""

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []
        self.answers: dict[str, dict[str, Any]] = {}

    @workflow.run
    async def run(self) -> list[dict[str, Any]]:
        await workflow.wait_condition(lambda: bool(self.asked))
        await workflow.sleep(timedelta(seconds=1))  # the activity polls meanwhile
        action_id = self.asked[0]["actionId"]
        self.answers[action_id] = {
            "actionId": action_id,
            "action": "accept",
            "content": {"name": "Ada"},
        }
        await workflow.wait_condition(lambda: False, timeout=timedelta(seconds=30))
        return self.asked

    @workflow.signal(name=SIGNAL_MCP_ELICITATION)
    def elicit(self, payload: dict[str, Any]) -> None:
        self.asked.append(payload)

    @workflow.query(name=QUERY_MCP_ELICITATION)
    def answer(self, action_id: str) -> dict[str, Any] | None:
        return self.answers.get(action_id)

    @workflow.query
    def elicitations(self) -> list[dict[str, Any]]:
        return self.asked


async def test_an_elicitation_is_signalled_to_the_workflow_and_its_answer_returned(
    rig: Rig, temporal_client: Client
) -> None:
    """The server's elicitation reaches the activity's workflow as `mcp_elicitation` (action
    id from the call and attempt, the server's timeout); the activity polls the answer query
    until the person's `accept` is there, and the server gets its content."""
    queue = f"mcp-elicit-{uuid.uuid4().hex[:8]}"
    async with Worker(
        temporal_client,
        task_queue=queue,
        workflows=[AnsweringWorkflow],
        workflow_runner=UnsandboxedWorkflowRunner(),
    ):
        handle = await temporal_client.start_workflow(
            AnsweringWorkflow.run, id=f"elicit-{uuid.uuid4().hex[:8]}", task_queue=queue
        )
        environment = ActivityEnvironment(client=temporal_client)
        environment.info = dataclasses.replace(environment.info, workflow_id=handle.id, attempt=2)
        result = await asyncio.wait_for(
            rig.call("t3", "ask_name", "{}", environment=environment), timeout=30
        )
        [asked] = await handle.query(AnsweringWorkflow.elicitations)
        await handle.terminate()
    assert _content(result) == {"status": "success", "result": "Hello, Ada!"}
    assert asked["actionId"] == "call1:elicit:a2:1"
    assert (asked["toolCallId"], asked["toolName"], asked["server"]) == (
        "call1",
        "mcp_ask_name",
        "tools",
    )
    assert asked["message"] == "What is your name?" and asked["timeoutSeconds"] == 30
    assert "name" in asked["requestedSchema"]["properties"]
