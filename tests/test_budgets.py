"""Budgets: hard caps on a thread's tree, every attempt counted, raised at run time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from subagent_support import family, start_boss
from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    read,
    start_thread,
    wait_until,
)
from temporalio.client import WorkflowUpdateFailedError

from weft.contract.budget import SIGNAL_SET_BUDGET, UPDATE_SET_BUDGET, BudgetState

WEATHER = {"tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]}


def _types(worker: Any, thread_id: str) -> list[str]:
    return [e.type for e in worker.store.events.read(thread_id, limit=10_000)]


def _assert_valid_events(worker: Any, *thread_ids: str) -> None:
    validator = event_schema_validator()
    for thread_id in thread_ids:
        for event in worker.store.events.read(thread_id, limit=10_000):
            wire = event.to_wire()
            errors = list(validator.iter_errors(wire))
            assert not errors, f"{wire['type']} is invalid: {errors[0].message}"


async def test_max_model_calls_ends_the_turn_and_set_budget_resumes(
    start_worker, temporal_client, scripted_server
):
    """A spent call budget ends the turn (quota.low, then quota.blocked); raising it lets
    the thread go on, and bad set_budget input is refused with a clear error."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "go on", "replies": [{"text": "done"}]},
                {"match": "*", "replies": [WEATHER, WEATHER, WEATHER, {"text": "done"}]},
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "go"}],
        options={"budget": {"maxModelCalls": 3}},
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "budget_exhausted"
    assert state.budget is not None
    assert state.budget.spent.model_calls == 3 and state.budget.blocked == "modelCalls"
    assert state.budget.limits.max_model_calls == 3 and state.budget.spent.tokens > 0
    types = _types(worker, handle.id)
    assert types.count("cost.recorded") == 3
    assert types.index("quota.low") < types.index("quota.blocked")
    assert types.count("model.requested") == 3  # the fourth call was never sent

    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(UPDATE_SET_BUDGET, {"budget": {"maxModelCalls": -1}})
    assert "maxModelCalls" in str(refused.value.cause)
    with pytest.raises(WorkflowUpdateFailedError) as empty:
        await handle.execute_update(UPDATE_SET_BUDGET, {})
    assert "at least one limit" in str(empty.value.cause)

    raised = await handle.execute_update(
        UPDATE_SET_BUDGET, {"budget": {"maxModelCalls": 10}}, result_type=BudgetState
    )
    assert raised.limits.max_model_calls == 10 and raised.blocked is None
    ledger = worker.store.budgets.get(handle.id, now=_now())
    assert ledger is not None and ledger.limits.max_model_calls == 10 and ledger.blocked is None
    # The raise resumes the stopped turn by itself: the model goes on from the transcript.
    state = await wait_until(handle, idle_after(2))
    assert state.stop_reason == "stop_on_response"
    assert state.budget is not None and state.budget.spent.model_calls == 4
    resumed = [
        e
        for e in worker.store.events.read(handle.id, limit=10_000)
        if e.type == "turn.started" and e.payload.get("reason") == "budget_raised"
    ]
    assert len(resumed) == 1
    await handle.signal("queue_message", {"role": "user", "content": "go on"})
    state = await wait_until(handle, idle_after(3))
    assert state.stop_reason == "stop_on_response"
    assert state.budget is not None and state.budget.spent.model_calls == 5

    # The signal does the same; a malformed one is only a warning.
    await handle.signal(SIGNAL_SET_BUDGET, {"budget": {"maxTokens": "lots"}})
    await handle.signal(
        SIGNAL_SET_BUDGET, {"budget": {"maxTokens": 50_000}, "clear": ["modelCalls"]}
    )
    await wait_until(
        handle, lambda s: s.budget is not None and s.budget.limits.max_tokens == 50_000
    )
    ledger = worker.store.budgets.get(handle.id, now=_now())
    assert ledger is not None
    assert ledger.limits.max_tokens == 50_000 and ledger.limits.max_model_calls is None
    assert (await read(handle)).warnings == 1
    assert "limit.changed" in _types(worker, handle.id)
    _assert_valid_events(worker, handle.id)


async def test_failed_attempts_are_counted(start_worker, temporal_client, scripted_server):
    """A refused attempt counts as a call with 0 tokens; a stream cut after it began counts
    its estimated tokens; both are marked estimated."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "refused",
                    "replies": [{"text": "ok", "error": {"status": 503}, "times": 1}],
                },
                {
                    "match": "*",
                    "replies": [
                        {"text": "a long enough answer " * 4, "drop_after_chunks": 3, "times": 1}
                    ],
                },
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "refused"}],
        options={"budget": {"maxModelCalls": 100}},
    )
    await wait_until(handle, idle_after(1), timeout=60)
    await handle.signal("queue_message", {"role": "user", "content": "cut"})
    state = await wait_until(handle, idle_after(2), timeout=60)
    costs = [e.payload for e in worker.store.events.read(handle.id) if e.type == "cost.recorded"]
    assert [c["estimated"] for c in costs] == [True, False, True, False]
    refused, _, cut, _ = costs
    assert refused["inputTokens"] == refused["outputTokens"] == 0
    assert cut["inputTokens"] > 0 and cut["outputTokens"] > 0
    assert state.budget is not None and state.budget.spent.model_calls == 4
    total = sum(c["inputTokens"] + c["outputTokens"] for c in costs)
    assert state.budget.spent.tokens == total
    assert state.budget.spent.tokens > state.usage.input_tokens + state.usage.output_tokens


async def test_a_parent_budget_bounds_its_children(start_worker, temporal_client, scripted_server):
    """A blocking child spends from its parent's ledger: the tree stops at the limit."""
    parent = add_script(
        scripted_server,
        {
            "replies": [
                {"tool_calls": [{"name": "researcher", "arguments": {"message": "dig"}}]},
                {"text": "thanks"},
            ]
        },
    )
    child = add_script(scripted_server, {"replies": [WEATHER, WEATHER, WEATHER, WEATHER]})
    worker = await start_worker(family(parent, child))
    handle = await start_boss(temporal_client, worker, options={"budget": {"maxModelCalls": 3}})
    state = await wait_until(handle, idle_after(1), timeout=60)
    assert state.stop_reason == "budget_exhausted"
    [entry] = state.children
    child_id = entry["reference"]
    ledger = worker.store.budgets.get(handle.id, now=_now())
    assert ledger is not None and ledger.spent.model_calls == 3
    child_costs = [
        e.payload for e in worker.store.events.read(child_id) if e.type == "cost.recorded"
    ]
    assert len(child_costs) == 2 and {c["rootThreadId"] for c in child_costs} == {handle.id}
    assert "quota.blocked" in _types(worker, child_id)
    assert "quota.blocked" in _types(worker, handle.id)
    assert worker.store.budgets.get(child_id, now=_now()) is None  # no ledger of its own
    _assert_valid_events(worker, handle.id, child_id)


async def test_set_budget_on_a_child_is_refused_naming_the_root(
    start_worker, temporal_client, scripted_server
):
    """Only a tree's root takes set_budget; a thread that spends from another's ledger refuses."""
    script = add_script(scripted_server, {"replies": [{"text": "hi"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(temporal_client, worker.task_queue, budget_root="thread-the-root")
    await wait_until(handle, lambda s: s.status == "waiting_input")
    with pytest.raises(WorkflowUpdateFailedError) as refused:
        await handle.execute_update(UPDATE_SET_BUDGET, {"budget": {"maxModelCalls": 5}})
    assert "set_budget on thread-the-root" in str(refused.value.cause)


async def test_an_agent_budget_is_stricter_than_the_options(
    start_worker, temporal_client, scripted_server
):
    """The agent definition's budget wins over a looser options.budget."""
    script = add_script(scripted_server, {"replies": [WEATHER, WEATHER, {"text": "done"}]})
    worker = await start_worker(agent_definitions(script, budget={"maxModelCalls": 2}))
    handle = await start_thread(
        temporal_client,
        worker.task_queue,
        messages=[{"role": "user", "content": "go"}],
        options={"budget": {"maxModelCalls": 50, "maxTokens": 1_000_000}},
    )
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "budget_exhausted"
    assert state.budget is not None
    assert state.budget.limits.max_model_calls == 2
    assert state.budget.limits.max_tokens == 1_000_000
    assert state.budget.spent.model_calls == 2


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


async def test_a_budget_refusal_says_which_limit_and_how_to_raise_it(
    start_worker, temporal_client, scripted_server
):
    """The turn a spent budget ends carries the limit and how to raise it in lastOutcome,
    TurnResult.error, the stored read model and the turn.completed event."""
    from weft.client.resume import thread_read_from_store
    from weft.client.threads import Threads

    script = add_script(scripted_server, {"replies": [WEATHER, {"text": "done"}]})
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, options={"budget": {"maxModelCalls": 1}}
    )
    await wait_until(handle, lambda s: s.status == "waiting_input")
    threads = Threads(temporal_client, task_queue=worker.task_queue, store=worker.store)
    result = await threads.ask(handle.id, "go")
    assert result.stop_reason == "budget_exhausted" and result.status == "failed"
    hint = f"weft thread budget {handle.id} --max-model-calls N"
    assert result.error is not None and "modelCalls" in result.error and hint in result.error
    assert f"POST /threads/{handle.id}/budget" in result.error
    state = await read(handle)
    assert state.stop_reason == "budget_exhausted" and state.last_outcome == result.error
    [ended] = worker.store.events.read(handle.id, types=["turn.completed"])
    assert ended.payload["stopReason"] == "budget_exhausted"
    assert ended.payload["outcome"] == result.error
    for _ in range(200):  # the stored read model follows with the next snapshot.updated
        stored = thread_read_from_store(worker.store, handle.id)
        if stored is not None and stored.stop_reason == "budget_exhausted":
            break
        await asyncio.sleep(0.05)
    assert stored is not None and stored.last_outcome == result.error
    _assert_valid_events(worker, handle.id)
