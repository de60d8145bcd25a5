"""Committed histories of both builds of a deploy (tests/test_deploys.py records them with
WEFT_RECORD_DEPLOY_HISTORIES) replay on their own build's workflow code."""

from __future__ import annotations

from pathlib import Path

import pytest
from deploy_worker_v2 import v2_build
from support import patch_markers
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from weft.workers.workflow_runner import workflow_runner
from weft.workflows.agent_thread import AgentThreadWorkflow
from weft.workflows.continuation import UPGRADE_PATCH

FOLDER = Path(__file__).parent / "histories" / "deploys"
V1_RUNS = sorted(FOLDER.glob("deploy_v1_*.json"))
V2_RUNS = sorted(FOLDER.glob("deploy_v2_*.json"))


def history_of(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


async def replay_failure(path: Path) -> Exception | None:
    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[AgentThreadWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(pydantic_data_converter),
    )
    result = await replayer.replay_workflow(history_of(path), raise_on_replay_failure=False)
    return result.replay_failure


def test_both_builds_are_committed():
    """There are runs of each build, and a run that moved at the upgrade patch."""
    assert V1_RUNS and V2_RUNS
    assert any(
        UPGRADE_PATCH in {patch for _, patch in patch_markers(history_of(p))} for p in V1_RUNS
    )


@pytest.mark.parametrize("path", V1_RUNS, ids=[p.stem for p in V1_RUNS])
async def test_v1_runs_replay_on_v1_code(path: Path) -> None:
    """A run of the v1 build (today's code) replays without non-determinism."""
    assert await replay_failure(path) is None


@pytest.mark.parametrize("path", V2_RUNS, ids=[p.stem for p in V2_RUNS])
async def test_v2_runs_replay_on_v2_code_only(path: Path) -> None:
    """A run of the v2 build replays on v2's code, and fails on v1's: only pinning kept the
    builds' runs apart."""
    with v2_build():
        assert await replay_failure(path) is None
    assert await replay_failure(path) is not None
