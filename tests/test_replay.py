"""Committed histories replay on the current workflow code (determinism guard).

A change that breaks one of these needs `workflow.patched`; see docs/design-notes.md,
"Versioning workflow code".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from weft.workers.workflow_runner import workflow_runner
from weft.workflows.agent_thread import AgentThreadWorkflow

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_committed():
    """The replay suite has histories of the main scenarios to replay."""
    names = {p.stem for p in HISTORIES}
    assert {
        "tool_then_answer",
        "queued_while_busy",
        "terminated_mid_call",
        "model_error_then_fallback",
        "continued_as_new_run1",
        "continued_as_new_run2",
        "continued_idle_run1",
        "continued_idle_run2",
        "subagents_parent",
        "subagents_child",
        "prompt_tool",
        "hooks",
        "asks",
        "effects",
        "mcp",
        "truthful_log",
        "continued_as_new_before_truthful_run1",
        "definitions_check",
    } <= names


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_replay(path: Path) -> None:
    """Replaying the recorded history raises no non-determinism error."""
    history = WorkflowHistory.from_json(path.stem, path.read_text())
    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[AgentThreadWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(pydantic_data_converter),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, f"{path.name}: {result.replay_failure}"
