"""Recorded cases whose turns end through a stop tool: the answer compared with the
recording is the one the user saw, so an unchanged run shows no divergence."""

from __future__ import annotations

from pathlib import Path

import yaml
from support import StartWorker, add_script, agent_definitions
from temporalio.client import Client

from weft import evals
from weft.client.threads import Threads
from weft.definitions import Definitions
from weft.workers.config import WeftConfig
from weft.workers.scripted_model import ScriptedModelServer

# Turn 1 ends by the stop tool with an answer; turn 2 with an empty one, beside text the
# model wrote along with the call (the user sees the empty response, not that text).
STOP_SCRIPT = {
    "turns": [
        {
            "match": "regex:^one",
            "replies": [{"tool_calls": [{"name": "finish", "arguments": {"answer": "42"}}]}],
        },
        {
            "match": "regex:^two",
            "replies": [
                {
                    "text": "Let me see.",
                    "tool_calls": [{"name": "finish", "arguments": {"answer": ""}}],
                }
            ],
        },
    ]
}


def _definitions(scripted_server: ScriptedModelServer) -> Definitions:
    return agent_definitions(
        add_script(scripted_server, STOP_SCRIPT),
        side={"stopTool": "finish", "stopToolResponseProperty": "answer"},
    )


async def test_stop_tool_answers_match_their_recording(
    start_worker: StartWorker,
    temporal_client: Client,
    scripted_server: ScriptedModelServer,
    weft_config: WeftConfig,
    tmp_path: Path,
) -> None:
    """Turns ended by a stop tool, replayed on the same definitions, match their
    recording: no divergence, and each answer is the response the user was given."""
    worker = await start_worker(_definitions(scripted_server))
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    handle = await threads.start("helper")
    seen = [(await threads.ask(handle.id, q, timeout=60)).response for q in ("one?", "two?")]
    assert seen == ["42", ""]
    await threads.terminate(handle.id, "recorded")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "stop.yaml").write_text(yaml.safe_dump({"recorded": handle.id}))
    report = await evals.run_suite(
        temporal_client,
        suite,
        _definitions(scripted_server),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
    )
    (case,) = report.cases
    assert case.divergence is None, case.divergence
    assert case.passed, (case.error, case.checks)
    assert [t.answer for t in case.turns] == seen
