"""The routing facts of 001: which models may answer a step, which one does,
a fallback taken, and no model left; through real threads, each valid against the schema."""

from __future__ import annotations

import asyncio
from typing import Any

from support import (
    add_script,
    event_schema_validator,
    idle_after,
    start_thread,
    store_of,
    wait_until,
)

from weft.contract.events import Event
from weft.definitions import Definitions, define_agent, define_model, define_prompt
from weft.workers.agent_worker import AgentWorker

ROUTING = (
    "routing.candidates.resolved",
    "routing.decided",
    "routing.single_candidate",
    "routing.fallback.applied",
    "routing.not_possible",
)


def _models(primary: str, backup: str | None = None) -> Definitions:
    fallbacks = ["backup"] if backup else []
    definitions = Definitions().add(
        define_model(name="primary", provider="scripted", model=primary, fallbacks=fallbacks),
        define_prompt(name="p", toolDescription="d", model="primary", prompt="Be brief."),
        define_agent(name="helper", sideA={"prompt": "p"}),
    )
    if backup:
        definitions = definitions.add(
            define_model(name="backup", provider="scripted", model=backup)
        )
    return definitions


async def _run(worker: Any, temporal_client: Any, *, fails: bool = False) -> tuple[Any, list[Any]]:
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "hi"}]
    )
    if fails:  # a failed turn is not counted: wait for the idle thread's stop reason
        state = await wait_until(
            handle, lambda s: s.status == "waiting_input" and s.stop_reason == "step_error"
        )
    else:
        state = await wait_until(handle, idle_after(1))
    events = await _stored_idle(worker, handle.id)
    validator = event_schema_validator()
    for event in events:
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"
    return state, events


async def _stored_idle(worker: AgentWorker, thread_id: str) -> list[Event]:
    """The thread's events once its idle `thread.updated` is stored: the status turns
    `waiting_input` just before that write, and the workflow's events ride on it."""
    deadline = asyncio.get_running_loop().time() + 30
    while True:
        events = store_of(worker).events.read(thread_id, limit=10_000)
        if any(e.type == "thread.updated" and e.payload.get("status") == "idle" for e in events):
            return events
        assert asyncio.get_running_loop().time() < deadline, "the idle write was never stored"
        await asyncio.sleep(0.05)


def _routing(events: list[Any]) -> list[Any]:
    return [e for e in events if e.type in ROUTING]


async def test_a_fallback_is_decided_then_applied(start_worker, temporal_client, scripted_server):
    """A primary that refuses (401, not retried) writes candidates and its decision, then
    routing.fallback.applied names the backup, which answers; all before its request."""
    primary = add_script(scripted_server, {"replies": [{"error": {"status": 401}}]})
    backup = add_script(scripted_server, {"replies": [{"text": "backup here"}]})
    worker = await start_worker(_models(primary, backup))
    state, events = await _run(worker, temporal_client)
    assert state.last_outcome == "backup here"
    resolved, decided, applied = _routing(events)
    assert resolved.type == "routing.candidates.resolved"
    assert resolved.payload["candidates"] == ["primary", "backup"]
    assert resolved.payload["candidateCount"] == 2
    assert decided.type == "routing.decided"
    assert decided.payload["selectedModel"] == "primary" and decided.payload["rank"] == 0
    assert decided.payload["fallbacks"] == ["backup"]
    assert applied.type == "routing.fallback.applied"
    assert applied.payload["selectedModel"] == "backup" and applied.payload["rank"] == 1
    assert applied.payload["fromModel"] == "primary"
    assert applied.payload["providerModel"] == backup
    assert applied.step_id == decided.step_id and applied.model_request_id.endswith(".backup")
    order = [e.event_id for e in events]
    [requested] = [
        e for e in events if e.type == "model.requested" and e.payload["model"] == "backup"
    ]
    assert order.index(applied.event_id) < order.index(requested.event_id)
    assert not [e for e in events if e.type == "routing.not_possible"]


async def test_a_single_candidate_is_said_once_per_call(
    start_worker, temporal_client, scripted_server
):
    """A model without fallbacks writes routing.single_candidate, once for the call though
    its first attempt was rate limited and retried."""
    primary = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "text": "second attempt",
                    "error": {"status": 429, "headers": {"Retry-After": "1"}},
                    "times": 1,
                }
            ]
        },
    )
    worker = await start_worker(_models(primary))
    state, events = await _run(worker, temporal_client)
    assert state.last_outcome == "second attempt"
    assert len([e for e in events if e.type == "model.requested"]) == 2
    resolved, single = _routing(events)
    assert resolved.type == "routing.candidates.resolved"
    assert resolved.payload["candidates"] == ["primary"]
    assert single.type == "routing.single_candidate"
    assert single.payload["candidateCount"] == 1
    assert single.payload["selectedModel"] == "primary"
    assert single.payload["decisionSource"] == "prompt_model"
    assert single.turn_id and single.step_id and single.model_request_id


async def test_no_model_left_is_routing_not_possible(
    start_worker, temporal_client, scripted_server
):
    """When the primary and its fallback both refuse, routing.not_possible names both and
    the last failure, and the turn ends on step_error."""
    primary = add_script(scripted_server, {"replies": [{"error": {"status": 401}}]})
    backup = add_script(scripted_server, {"replies": [{"error": {"status": 403}}]})
    worker = await start_worker(_models(primary, backup))
    state, events = await _run(worker, temporal_client, fails=True)
    assert state.stop_reason == "step_error"
    kinds = [e.type for e in _routing(events)]
    assert kinds == [
        "routing.candidates.resolved",
        "routing.decided",
        "routing.fallback.applied",
        "routing.not_possible",
    ]
    impossible = _routing(events)[-1]
    assert impossible.payload["candidates"] == ["primary", "backup"]
    assert "403" in impossible.payload["reason"]
    assert impossible.turn_id and impossible.step_id
