"""Committed `TaskRun` histories replay on the current workflow code (determinism guard).

tests/histories/tasks/ holds the runs of tests/task_scenarios.py, recorded with
`python tests/record_histories.py task_commands`: a task held, linked, started, paused
while its first attempt ran, resumed and retried; and the dependency that told it it had
completed. Beside them, the runs of a task that continued as new from each of its rests
(`WEFT_RECORD_TASK_HISTORIES=1` on tests/test_task_continue_as_new.py), and a task
cancelled through Temporal while its attempt ran, which wrote its own end
(`python tests/record_histories.py task_temporal_cancel`). A change to the commands `TaskRun` issues needs `workflow.patched`, and these
histories must keep replaying (record new ones next to them).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import patch_markers
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from weft.contract.tasks import (
    ACTIVITY_TASK_ATTEMPT,
    SIGNAL_APPEND_PROGRESS,
    SIGNAL_DEPENDENCY_SETTLED,
    UPDATE_LINK_TASKS,
    UPDATE_PAUSE_TASK,
    UPDATE_RESUME_TASK,
    UPDATE_START_TASK,
)
from weft.transport.codec import data_converter
from weft.workers.workflow_runner import workflow_runner
from weft.workflows.tasks import task_attempts
from weft.workflows.tasks.task_continuation import CONTINUE_AS_NEW_PATCH
from weft.workflows.tasks.task_run import (
    TASK_COMMANDS_PATCH,
    TEMPORAL_CANCEL_PATCH,
    TaskRunWorkflow,
)

FOLDER = Path(__file__).parent / "histories" / "tasks"
HISTORIES = sorted(FOLDER.glob("*.json"))
TASK = FOLDER / "task_commands_task.json"
# The runs of one task that continued as new from each of its rests (held, queued, paused
# between attempts), recorded by tests/test_task_continue_as_new.py.
CONTINUED = sorted(FOLDER.glob("task_continue_as_new_run*.json"))
TEMPORAL_CANCEL = FOLDER / "task_temporal_cancel.json"


def history_of(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


async def replay_failure(path: Path) -> Exception | None:
    converter = data_converter(None)
    replayer = Replayer(
        # Determinism is what is checked: a long GC pause in a busy test process is no
        # deadlock (the SDK's 2 s detector fired on one under CI).
        debug_mode=True,
        workflows=[TaskRunWorkflow],
        data_converter=converter,
        workflow_runner=workflow_runner(converter),
    )
    result = await replayer.replay_workflow(history_of(path), raise_on_replay_failure=False)
    return result.replay_failure


def _names(path: Path, attributes: str, field: str) -> list[str]:
    """The names one kind of history event carries (`field` inside `attributes`), in order."""
    events = json.loads(path.read_text())["events"]
    found = []
    for event in events:
        value = event.get(attributes, {})
        for key in field.split("."):
            value = value.get(key, {})
        if value:
            found.append(str(value))
    return found


def test_the_task_histories_are_committed():
    """The recorded run took a retry and each kind of command: the replay checks them."""
    assert [p.stem for p in HISTORIES if p not in CONTINUED] == [
        "task_commands_dependency",
        "task_commands_task",
        "task_temporal_cancel",
    ]
    attempts = _names(TASK, "activityTaskScheduledEventAttributes", "activityType.name")
    assert attempts == [ACTIVITY_TASK_ATTEMPT, ACTIVITY_TASK_ATTEMPT]
    updates = _names(
        TASK, "workflowExecutionUpdateAcceptedEventAttributes", "acceptedRequest.input.name"
    )
    assert updates == [UPDATE_LINK_TASKS, UPDATE_START_TASK, UPDATE_PAUSE_TASK, UPDATE_RESUME_TASK]
    signals = _names(TASK, "workflowExecutionSignaledEventAttributes", "signalName")
    assert signals == [SIGNAL_DEPENDENCY_SETTLED, SIGNAL_APPEND_PROGRESS]
    for path in HISTORIES:
        markers = [name for _, name in patch_markers(history_of(path))]
        patches = (
            [TASK_COMMANDS_PATCH, CONTINUE_AS_NEW_PATCH]
            if path in CONTINUED
            else [TASK_COMMANDS_PATCH]
        )
        if path == TEMPORAL_CANCEL:
            patches = [
                TASK_COMMANDS_PATCH,
                TEMPORAL_CANCEL_PATCH,
                CONTINUE_AS_NEW_PATCH,
                task_attempts.ABANDON_THREAD_PATCH,
            ]
        assert markers == patches
    cancelled = _names(TEMPORAL_CANCEL, "workflowExecutionCancelRequestedEventAttributes", "cause")
    assert cancelled == ["recorded"]  # the run went on from Temporal's cancel, and returned
    closed = json.loads(TEMPORAL_CANCEL.read_text())["events"][-1]
    assert "workflowExecutionCompletedEventAttributes" in closed


@pytest.mark.parametrize("path", HISTORIES, ids=[p.stem for p in HISTORIES])
async def test_task_history_replays(path: Path) -> None:
    """Replaying the recorded run raises no non-determinism error."""
    assert await replay_failure(path) is None


async def test_a_changed_command_fails_the_replay(monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay sees a change to TaskRun's commands: with the attempt scheduled as
    another activity, the recorded run no longer replays."""
    monkeypatch.setattr(task_attempts, "ACTIVITY_TASK_ATTEMPT", "task.attempt.changed")
    failure = await replay_failure(TASK)
    assert failure is not None and "Nondeterminism" in str(failure)
    assert "task.attempt.changed" in str(failure)
