"""An eval leaves nothing running: when `run_suite` returns, every case's thread and its
subagents have closed (the eval's worker is gone, so a thread left open would stay open)."""

from __future__ import annotations

import yaml
from support import add_script, agent_definitions
from temporalio.client import Client, WorkflowExecutionStatus
from test_eval_subagents import CALLS, _recorded, _run

from weft import evals
from weft.store import Store


async def _closed(temporal_client: Client, thread_id: str) -> bool:
    described = await temporal_client.get_workflow_handle(thread_id).describe()
    return described.status != WorkflowExecutionStatus.RUNNING


async def test_case_threads_are_closed_when_the_suite_returns(
    temporal_client, scripted_server, weft_config, tmp_path
):
    """Every case thread of a suite run eight at once has closed when `run_suite` returns."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for number in range(8):
        case = {"agent": "helper", "turns": [{"user": "hi"}]}
        (suite / f"c{number}.yaml").write_text(yaml.safe_dump(case))
    report = await evals.run_suite(
        temporal_client,
        suite,
        agent_definitions(add_script(scripted_server, {"replies": [{"text": "hello"}]})),
        config=weft_config,
        scripted=scripted_server,
        results=tmp_path / "results",
        concurrency=8,
    )
    assert report.ok and len(report.cases) == 8
    still_open = [
        c.thread_id for c in report.cases if not await _closed(temporal_client, c.thread_id or "")
    ]
    assert not still_open, f"threads left running: {still_open}"


async def test_subagents_of_a_case_are_closed(
    start_worker, temporal_client, scripted_server, weft_config, tmp_path
):
    """A recorded case's thread and the subagent it started have both closed."""
    CALLS.clear()
    thread_id = await _recorded(start_worker, temporal_client, scripted_server)
    case = await _run(temporal_client, scripted_server, weft_config, tmp_path, thread_id, 3)
    assert case.passed and case.thread_id is not None, (case.error, case.checks)
    store = Store.open(weft_config.store_url())
    try:
        children = [e["reference"] for e in store.subagents.list(case.thread_id)]
    finally:
        store.close()
    assert children, "the case started no subagent"
    for thread in [case.thread_id, *children]:
        assert await _closed(temporal_client, thread), f"{thread} left running"
