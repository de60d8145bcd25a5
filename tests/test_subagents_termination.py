"""How subagents end badly (Runtime §10): termination, failures and malformed signals."""

from __future__ import annotations

from subagent_support import family, start_boss, tool_result
from support import add_script, idle_after, wait_until


async def test_terminating_the_parent_terminates_running_children(
    start_worker, temporal_client, scripted_server
):
    """terminate propagates down (§10); the children's closure reaches the parent registry."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "tool_calls": [
                        {"name": "researcher", "arguments": {"message": "slow one"}},
                        {"name": "researcher", "arguments": {"message": "slow two"}},
                    ]
                },
                {"text": "both running"},
            ]
        },
    )
    child = add_script(scripted_server, {"replies": [{"delay_ms": 60_000, "text": "never"}]})
    worker = await start_worker(family(parent, child, subagent={"blocking": False}))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, lambda s: len(s.children) == 2 and idle_after(1)(s))
    children = [temporal_client.get_workflow_handle(e["reference"]) for e in state.children]
    for child_handle in children:
        await wait_until(child_handle, lambda s: s.status == "running")
    await handle.signal("terminate", {"reason": "stop everything"})
    result = await handle.result()
    assert result["status"] == "cancelled"
    for child_handle in children:
        done = await child_handle.result()
        assert done["status"] == "cancelled" and "stop everything" not in (done["reason"] or "")
        assert handle.id in done["reason"]
    closed = [
        e.payload["entry"] for e in worker.store.events.read(handle.id, types=["subagent.closed"])
    ]
    assert sorted(e["reference"] for e in closed) == sorted(c.id for c in children)
    assert {e["status"] for e in closed} == {"terminated"}


async def test_a_failing_child_is_a_failure_the_parent_can_act_on(
    start_worker, temporal_client, scripted_server
):
    """A child whose model fails past retries reports `failed`; the parent's tool result is a
    `subagent_failed` error and the parent carries on."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "try"}}]},
                {"text": "the researcher failed, I will answer myself"},
            ]
        },
    )
    child = add_script(
        scripted_server, {"replies": [{"error": {"status": 400, "body": "bad request from test"}}]}
    )
    worker = await start_worker(family(parent, child))
    handle = await start_boss(temporal_client, worker)
    state = await wait_until(handle, idle_after(1))
    result = tool_result(worker.store, handle.id, "researcher")
    assert result["status"] == "error" and result["error_code"] == "subagent_failed"
    assert "step_error" in result["error"] and "bad request from test" in result["error"]
    assert state.children[0]["status"] == "failed"
    assert worker.store.messages.list(handle.id)[-1].content.startswith("the researcher failed")
    assert worker.store.events.read(handle.id, types=["subagent.failed"])


async def test_malformed_subagent_signals_become_warnings(
    start_worker, temporal_client, scripted_server
):
    """Reports and bootstrap signals from nowhere never fail a task: each is a warning."""
    parent = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker = await start_worker(family(parent, parent))
    handle = await start_boss(temporal_client, worker)
    await wait_until(handle, idle_after(1))
    await handle.signal("subagent_report", {"reference": "thread_x", "kind": "explode"})
    await handle.signal(
        "subagent_report", {"reference": "thread_x", "kind": "completed", "reportId": "r1"}
    )
    await handle.signal("variables_provided", {"requestId": "varreq_unknown"})
    await handle.signal("variables_provided", ["not", "an", "object"])
    state = await wait_until(handle, lambda s: s.warnings >= 4)
    codes = [i["code"] for i in state.incidents]
    assert codes[-4:] == [
        "malformed_signal",
        "unknown_subagent",
        "unknown_variable_request",
        "malformed_signal",
    ]
    assert state.status == "waiting_input" and state.children == []
