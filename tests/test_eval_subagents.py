"""Recorded eval cases whose agent delegates to a subagent: with tools replayed, the
subagent's tool calls are served from the recorded child thread's results (no tool body
runs), and a subagent call the recording lacks fails the case naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from support import StartWorker, add_script
from temporalio.client import Client

from weft import evals
from weft.client.threads import Threads
from weft.contract.evals import CaseResult
from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

CALLS: list[int] = []


class CountArgs(BaseModel):
    """Arguments of the counting tool."""

    n: int


def count(state: Any, args: CountArgs) -> dict[str, Any]:
    """A subagent's tool with a side effect the test can see: each run is counted."""
    CALLS.append(args.n)
    return {"counted": args.n, "runs": len(CALLS)}


def _definitions(boss_script: str, child_script: str) -> Definitions:
    """`boss` delegates to the blocking `clerk` subagent, whose side A counts and reports."""
    return Definitions().add(
        define_model(name="boss_model", provider="scripted", model=boss_script),
        define_model(name="clerk_model", provider="scripted", model=child_script),
        define_prompt(
            name="boss_prompt",
            toolDescription="leads",
            model="boss_model",
            prompt="You delegate counting.",
            tools=[{"name": "clerk"}],
        ),
        define_prompt(
            name="clerk_prompt",
            toolDescription="counts",
            model="clerk_model",
            prompt="You count.",
            tools=["count"],
        ),
        define_prompt(
            name="critic_prompt", toolDescription="critiques", model="clerk_model", prompt="."
        ),
        define_agent(name="boss", sideA={"prompt": "boss_prompt"}),
        define_agent(
            name="clerk",
            type="dual_ai",
            exposeAsTool=True,
            toolDescription="Counts and reports back.",
            maxSessionTurns=3,
            sideA={
                "prompt": "clerk_prompt",
                "sessionStop": {"name": "report", "messageProperty": "summary"},
            },
            sideB={"prompt": "critic_prompt"},
        ),
        define_tool(name="count", description="Count n", args=CountArgs, execute=count),
    )


def _scripts(
    scripted_server: ScriptedModelServer, n: int, summary: str = "counted"
) -> tuple[str, str]:
    boss = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "clerk", "arguments": {"message": "count please"}}]},
                {"text": "the clerk counted"},
            ]
        },
    )
    clerk = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "count", "arguments": {"n": n}}]},
                {"tool_calls": [{"name": "report", "arguments": {"summary": summary}}]},
            ]
        },
    )
    return boss, clerk


async def _recorded(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> str:
    worker = await start_worker(_definitions(*_scripts(scripted_server, 3)))
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    handle = await threads.start("boss")
    result = await threads.ask(handle.id, "delegate", timeout=60)
    assert result.status == "completed" and result.response == "the clerk counted", result
    await threads.terminate(handle.id, "recorded")
    assert CALLS == [3], "the recording runs the subagent's tool once"
    return handle.id


async def _run(
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    weft_config: WeftConfig,
    tmp_path: Path,
    thread_id: str,
    n: int,
    summary: str = "counted",
) -> CaseResult:
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "delegated.yaml").write_text(yaml.safe_dump({"recorded": thread_id}))
    report = await evals.run_suite(
        temporal_client,
        suite,
        _definitions(*_scripts(scripted_server, n, summary)),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
    )
    (case,) = report.cases
    return case


async def test_subagent_tools_are_replayed(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """The subagent of a replayed case is served its recorded tool result: the case passes
    and the tool body's counter does not move."""
    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    case = await _run(temporal_client, scripted_server, weft_config, tmp_path, thread_id, 3)
    assert case.passed, (case.error, case.checks)
    assert case.turns[0].answer == "the clerk counted"
    assert CALLS == [3], "a replayed subagent ran its tool body"


async def test_unrecorded_subagent_call_fails_naming_it(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A subagent call with arguments the recording lacks gets an error result, not a run,
    and the case fails naming the call and the subagent that made it."""
    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    case = await _run(temporal_client, scripted_server, weft_config, tmp_path, thread_id, 4)
    replay = next(c for c in case.checks if c.name == "toolReplay")
    assert not replay.passed and not case.passed
    assert replay.detail.startswith('no recorded result for count({"n":4}) in subagent '), replay
    assert CALLS == [3], "a replayed subagent ran its tool body"


async def test_lifecycle_tools_run_under_replay(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A subagent that reports in other words ends its session as it would live: its
    lifecycle tool (`sessionStop`) has no effect to replay, so it is no replay miss."""
    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    case = await _run(
        temporal_client, scripted_server, weft_config, tmp_path, thread_id, 3, "in other words"
    )
    replay = next(c for c in case.checks if c.name == "toolReplay")
    assert replay.passed, replay
    assert case.passed, (case.error, case.checks)
    assert CALLS == [3], "a replayed subagent ran its tool body"


def test_subagents_at_any_depth_find_their_eval_thread():
    """A grandchild of an eval thread is served from its table's subagent results; a
    thread of no eval runs live, and so does a subagent once its eval thread is forgotten."""
    from weft.activities.tool_replay import ReplayTable, ToolReplays
    from weft.contract.activities import ToolResult

    parents = {"child": "eval-1", "grandchild": "child", "stranger": None}
    replays = ToolReplays(parents=parents.get)
    recorded = [("count", {"n": 1}, ToolResult(status="success", result="one"))]
    replays.register("eval-1", ReplayTable([], subagents=recorded))
    served = replays.serve("grandchild", "count", '{"n": 1}', "m1")
    assert served is not None and served.result == "one"
    missed = replays.serve("child", "count", '{"n": 2}', "m2")
    assert missed is not None and missed.status == "error"
    assert replays.serve("stranger", "count", '{"n": 1}', "m3") is None
    replays.forget("eval-1")
    assert replays.serve("grandchild", "count", '{"n": 1}', "m4") is None
