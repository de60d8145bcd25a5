"""Recorded eval cases: a thread recorded with a counting tool is replayed against the
definitions under test with its recorded tool results, never running the tool body; a call
the recording lacks fails the case naming it, with the divergence shown side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from support import StartWorker, add_script
from temporalio.client import Client

from weft import evals
from weft.client.evals.report import render_table
from weft.client.threads import Threads
from weft.definitions import (
    Definitions,
    define_agent,
    define_model,
    define_prompt,
    define_tool,
)
from weft.store import Store
from weft.workers.scripted_model import ScriptedModelServer

CALLS: list[dict[str, Any]] = []


class CountArgs(BaseModel):
    """Arguments of the counting tool."""

    n: int


def count(state: Any, args: CountArgs) -> dict[str, Any]:
    """A tool with a side effect the test can see: every run of its body is counted."""
    CALLS.append({"n": args.n})
    return {"counted": args.n, "total": len(CALLS)}


def _definitions(script: str) -> Definitions:
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="counter_prompt",
            toolDescription="counts",
            model="scripted",
            prompt="You count.",
            tools=["count"],
        ),
        define_agent(name="counter", sideA={"prompt": "counter_prompt"}),
        define_tool(name="count", description="Count n", args=CountArgs, execute=count),
    )


def _script(n: int, answer: str) -> dict[str, Any]:
    return {
        "turns": [
            {
                "match": "regex:^one",
                "replies": [
                    {"tool_calls": [{"name": "count", "arguments": {"n": 1}}]},
                    {"text": "counted one"},
                ],
            },
            {
                "match": "regex:^two",
                "replies": [
                    {"tool_calls": [{"name": "count", "arguments": {"n": n}}]},
                    {"text": answer},
                ],
            },
        ]
    }


async def _recorded(
    start_worker: StartWorker, temporal_client: Client, scripted_server: ScriptedModelServer
) -> str:
    worker = await start_worker(_definitions(add_script(scripted_server, _script(2, "two"))))
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    handle = await threads.start("counter")
    for text in ("one please", "two please"):
        result = await threads.ask(handle.id, text, timeout=60)
        assert result.status == "completed", result
    await threads.terminate(handle.id, "recorded")
    assert [c["n"] for c in CALLS] == [1, 2]
    return handle.id


def _suite(folder: Path, thread_id: str) -> Path:
    folder.mkdir()
    (folder / "recorded.yaml").write_text(yaml.safe_dump({"recorded": thread_id}))
    return folder


async def test_replayed_tools_never_run_the_tool_body(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """In a suite of a recorded and an authored case, the recorded one replays its user
    turns with the recorded tool results (it passes, matches the recording, and the tool
    body's counter does not move for it) while the authored one runs its tool live."""
    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    suite = _suite(tmp_path / "suite", thread_id)
    authored = {"agent": "counter", "turns": [{"user": "one", "expect": {"contains": "one"}}]}
    (suite / "authored.yaml").write_text(yaml.safe_dump(authored))
    report = await evals.run_suite(
        temporal_client,
        suite,
        _definitions(add_script(scripted_server, _script(2, "two"))),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
    )
    live, case = report.cases  # in file-name order
    assert live.name == "authored" and live.passed, (live.error, live.checks)
    assert case.passed, (case.error, case.checks)
    assert [t.user for t in case.turns] == ["one please", "two please"]
    assert case.divergence is None
    assert {c.name for c in case.checks} >= {"toolReplay", "sameAsRecording", "noFailedTurn"}
    assert [c["n"] for c in CALLS] == [1, 2, 1], "only the authored case's call runs its body"


async def test_unrecorded_call_fails_naming_it(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """Definitions that call the tool with other arguments get an error result, not a
    run; the case fails naming the call, and the divergence is shown side by side."""
    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    report = await evals.run_suite(
        temporal_client,
        _suite(tmp_path / "suite", thread_id),
        _definitions(add_script(scripted_server, _script(7, "seven"))),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
    )
    (case,) = report.cases
    assert not case.passed and not report.ok
    replay = next(c for c in case.checks if c.name == "toolReplay")
    assert not replay.passed
    assert replay.detail == 'no recorded result for count({"n":7})'
    assert case.divergence is not None and case.divergence.turn == 2
    same = next(c for c in case.checks if c.name == "sameAsRecording")
    assert (same.turn, same.detail) == (2, "its answer and tool calls differ from the recording's")
    assert case.divergence.recorded.answer == "two" and case.divergence.actual.answer == "seven"
    table = render_table(report)
    assert "diverges at turn 2" in table and "recorded" in table and "new run" in table
    row = next(line for line in table.splitlines() if '→ count({"n":2})' in line)
    assert '→ count({"n":7})' in row, "the two runs are not side by side"
    assert len(CALLS) == 2, "a replayed tool ran its body"


async def test_bundle_case_replays_from_another_store(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A case naming an export bundle (relative to the case file) replays the recorded
    thread in a store that never held it, with its tool results, running no tool body."""
    from weft.client.bundles import export_thread

    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    await temporal_client.get_workflow_handle(thread_id).result()
    source = weft_config.model_copy(deep=True)
    store = Store.open(source.store_url())
    try:
        await export_thread(
            temporal_client, store, thread_id, tmp_path / "rec.weftbundle", namespace="default"
        )
    finally:
        store.close()
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "from-bundle.yaml").write_text(yaml.safe_dump({"bundle": "../rec.weftbundle"}))
    elsewhere = weft_config.model_copy(deep=True)
    elsewhere.store.url = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    report = await evals.run_suite(
        temporal_client,
        suite,
        _definitions(add_script(scripted_server, _script(2, "two"))),
        config=elsewhere,
        scripted=scripted_server,
        results=tmp_path / "results",
    )
    (case,) = report.cases
    assert case.passed, (case.error, case.checks)
    assert [t.user for t in case.turns] == ["one please", "two please"]
    assert len(CALLS) == 2, "a replayed tool ran its body"


async def test_live_tools_run_the_body(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """`tools="live"` runs a recorded case's tools for real: the counter moves."""
    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    report = await evals.run_suite(
        temporal_client,
        _suite(tmp_path / "suite", thread_id),
        _definitions(add_script(scripted_server, _script(2, "two"))),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
        tools="live",
    )
    (case,) = report.cases
    assert case.passed, (case.error, case.checks)
    assert "toolReplay" not in {c.name for c in case.checks}
    assert [c["n"] for c in CALLS] == [1, 2, 1, 2]
