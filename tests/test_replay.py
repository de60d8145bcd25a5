"""Committed histories replay on the current workflow code (determinism guard).

A change that breaks one of these needs `workflow.patched`; see docs/design-notes.md,
"Versioning workflow code".
"""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from weft.contract.activities import ACTIVITY_TOOL_CALL
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
        "quick_tool",
    } <= names


async def replay_failure(path: Path) -> Exception | None:
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
    return result.replay_failure


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_replay(path: Path) -> None:
    """Replaying the recorded history raises no non-determinism error."""
    failure = await replay_failure(path)
    assert failure is None, f"{path.name}: {failure}"


async def test_quick_tool_calls_replay_as_local_activities(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`quick_tool` holds its quick calls as local-activity markers (and its one activity
    tool call as an activity); run as activities, the quick calls fail its replay."""
    path = Path(__file__).parent / "histories" / "quick_tool.json"
    events = json.loads(path.read_text())["events"]
    scheduled = [
        e["activityTaskScheduledEventAttributes"]["activityType"]["name"]
        for e in events
        if "activityTaskScheduledEventAttributes" in e
    ]
    assert scheduled.count(ACTIVITY_TOOL_CALL) == 1, scheduled
    local = [_local_activity_type(e) for e in events if "markerRecordedEventAttributes" in e]
    assert local.count(ACTIVITY_TOOL_CALL) == 3, local

    def as_activity(activity: str, payload: Any, **options: Any) -> Any:
        return workflow.start_activity(
            activity, payload, heartbeat_timeout=timedelta(seconds=3), **options
        )

    monkeypatch.setattr(workflow, "start_local_activity", as_activity)  # as activity_calls calls it
    failure = await replay_failure(path)
    assert failure is not None and "Nondeterminism" in str(failure), failure


def _local_activity_type(event: dict[str, Any]) -> str | None:
    """The activity type a local activity's marker records (None for another marker)."""
    marker = event["markerRecordedEventAttributes"]
    if marker["markerName"] != "core_local_activity":
        return None
    data = marker["details"]["data"]["payloads"][0]["data"]
    activity_type: str = json.loads(base64.b64decode(data))["activity_type"]
    return activity_type
