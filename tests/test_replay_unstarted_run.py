"""The replay check passes over a run whose first workflow task has not started yet.

The server holds a continued run's first workflow task back until a second after the
previous run began, so a thread that continues as new quickly often has a newest run that
holds its start event alone; `Replayer.replay_workflow` never returns on such a history.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from support import assert_runs_replay, ran_workflow_code
from temporalio.client import WorkflowHistory

CONTINUED_RUN = Path(__file__).parent / "histories" / "continued_as_new_run2.json"


def continued_run() -> WorkflowHistory:
    """A recorded run that a continue-as-new started, with its first task held back."""
    return WorkflowHistory.from_json(CONTINUED_RUN.stem, CONTINUED_RUN.read_text())


def before_its_first_task(run: WorkflowHistory) -> WorkflowHistory:
    """The same run as fetched while its first workflow task waits out the backoff."""
    return WorkflowHistory(run.workflow_id, run.events[:1])


def test_a_run_is_seen_to_run_code_once_its_first_task_started():
    """A run holding only its start event ran no workflow code; the whole run did."""
    run = continued_run()
    assert run.events[0].workflow_execution_started_event_attributes.first_workflow_task_backoff
    assert ran_workflow_code(run)
    assert not ran_workflow_code(before_its_first_task(run))


async def test_the_replay_check_returns_on_a_run_waiting_for_its_first_task():
    """The check replays the runs that ran code and returns, instead of waiting forever in
    the Replayer on the newest run caught before its first workflow task."""
    run = continued_run()
    check = asyncio.ensure_future(assert_runs_replay([run, before_its_first_task(run)]))
    # Not wait_for: cancelling a hung replay hangs as well, in the Replayer's cleanup.
    done, _ = await asyncio.wait({check}, timeout=30)
    assert done, "the replay check never returned on a run waiting for its first task"
    assert check.result() == 1
