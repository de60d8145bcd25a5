"""Unit tests of the Env seam's tool dispatch (activities/env.py) and the worker's tool
sources in the order the worker composes them (workers/agent_worker.py `tool_env`)."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
from pydantic import BaseModel
from store_doubles import MemoryStore

from weft.activities.env import Dispatched, ToolDispatch, ToolSource, ToolSources
from weft.activities.spans import Spans
from weft.activities.tool_replay import ReplayTable, ToolReplays
from weft.activities.tool_state import ThreadState
from weft.contract.activities import ToolCallInput, ToolResult
from weft.contract.context import READ_OUTPUT_TOOL
from weft.contract.definitions import DefinitionSnapshot
from weft.contract.mcp import McpToolTarget
from weft.contract.messages import Message, ToolCall, ToolCallFunction
from weft.definitions import Definitions, define_agent, define_model, define_prompt, define_tool
from weft.workers.agent_worker import tool_env

# No dispatch below runs a tool body or an MCP call, the two that read the ThreadState.
NO_STATE = cast(ThreadState, object())


class NoteArgs(BaseModel):
    text: str


def _note(state: Any, args: NoteArgs) -> str:
    return args.text


def _definitions() -> Definitions:
    return Definitions().add(
        define_model(name="m", provider="openai", model="gpt"),
        define_prompt(name="p", toolDescription="helps", model="m", prompt="Hi.", tools=["note"]),
        define_agent(name="helper", sideA={"prompt": "p", "stopTool": "finish"}),
        define_tool(name="note", description="Remember a note", args=NoteArgs, execute=_note),
    )


def _request(
    snapshot: DefinitionSnapshot,
    name: str,
    arguments: str = "{}",
    *,
    mcp: McpToolTarget | None = None,
    thread_id: str = "t1",
) -> ToolDispatch:
    call = ToolCallInput(
        thread_id=thread_id,
        snapshot_id=snapshot.snapshot_id,
        side="a",
        turn_id="turn1",
        step_id="step1",
        tool_call=ToolCall(id="call1", function=ToolCallFunction(name=name, arguments=arguments)),
        result_message_id="msg1",
        result_position=1,
        mcp=mcp,
    )
    return ToolDispatch(call=call, snapshot=snapshot, state=NO_STATE)


class Claims:
    """A source that claims one name with a fixed result, and counts what it was asked."""

    def __init__(self, name: str, text: str) -> None:
        self.name, self.text, self.asked = name, text, 0

    async def dispatch(self, request: ToolDispatch) -> Dispatched | None:
        self.asked += 1
        if request.name != self.name:
            return None
        return Dispatched(ToolResult(status="success", result=self.text))


@pytest.fixture
def snapshot() -> DefinitionSnapshot:
    return _definitions().snapshot("helper")


async def test_the_first_source_that_claims_a_call_runs_it(snapshot: DefinitionSnapshot) -> None:
    """Sources are tried in their order; the ones after the claiming source are not asked."""
    first, second, third = Claims("a", "first"), Claims("b", "second"), Claims("b", "third")
    sources: list[ToolSource] = [first, second, third]
    dispatched = await ToolSources(sources).dispatch(_request(snapshot, "b"))
    assert dispatched.result.result == "second"
    assert (first.asked, second.asked, third.asked) == (1, 1, 0)


async def test_a_call_no_source_claims_is_an_unknown_tool_result(
    snapshot: DefinitionSnapshot,
) -> None:
    """The error names the tool and the thread's tools, and is a result, not an exception."""
    dispatched = await ToolSources([Claims("a", "x")]).dispatch(_request(snapshot, "ghost"))
    assert dispatched.result.status == "error"
    assert dispatched.result.error_code == "unknown_tool"
    assert dispatched.result.error == "unknown tool 'ghost'; available tools: finish, note"


async def test_the_worker_env_answers_each_kind_of_call(snapshot: DefinitionSnapshot) -> None:
    """Without MCP sessions or replays: an MCP call is unavailable, a lifecycle tool is
    acknowledged, bad arguments and unknown names are error results, and read_output pages
    the stored output (here from the in-memory message store)."""
    store = MemoryStore()
    store.messages.append(
        [Message(id="big", thread_id="t1", position=0, role="tool", content="x" * 50, created_at=0)]
    )
    tools = tool_env(store, _definitions(), None, spans=Spans()).tools()
    mcp = McpToolTarget(server="tools", tool="add")

    async def result(name: str, arguments: str = "{}", **kw: Any) -> ToolResult:
        return (await tools.dispatch(_request(snapshot, name, arguments, **kw))).result

    unavailable = await result("mcp_add", mcp=mcp)
    assert (unavailable.error_code, unavailable.error) == (
        "tool_unavailable",
        "tool 'mcp_add' is an MCP tool, and this worker runs no MCP sessions",
    )
    assert (await result("finish")).result == {"acknowledged": "finish"}
    assert (await result("note", "[1]")).error_code == "invalid_arguments"
    assert (await result("ghost")).error_code == "unknown_tool"
    ref = "weft://threads/t1/messages/big"
    page = await result(READ_OUTPUT_TOOL, json.dumps({"ref": ref, "limit": 5}))
    assert page.status == "success" and page.result["text"] == "xxxxx"


async def test_replayed_results_come_first_but_not_for_lifecycle_tools(
    snapshot: DefinitionSnapshot,
) -> None:
    """An eval thread's recorded result stands for the live call, an MCP one included; a
    lifecycle tool is still acknowledged, and another thread's calls run live."""
    replays = ToolReplays()
    recorded = ToolResult(status="success", result="recorded")
    replays.register("t1", ReplayTable([("mcp_add", {}, recorded), ("finish", {}, recorded)]))
    tools = tool_env(MemoryStore(), _definitions(), None, spans=Spans(), replays=replays).tools()
    mcp = McpToolTarget(server="tools", tool="add")
    replayed = await tools.dispatch(_request(snapshot, "mcp_add", mcp=mcp))
    assert replayed.result == recorded
    lifecycle = await tools.dispatch(_request(snapshot, "finish"))
    assert lifecycle.result.result == {"acknowledged": "finish"}
    live = await tools.dispatch(_request(snapshot, "mcp_add", mcp=mcp, thread_id="t2"))
    assert live.result.error_code == "tool_unavailable"
