"""Every event of a full scenario validates against the Agent Runtime event schema."""

from __future__ import annotations

import jsonschema
import pytest
from support import (
    add_script,
    agent_definitions,
    event_schema_validator,
    idle_after,
    start_thread,
    wait_until,
)

from weft.contract.thread import ThreadResult


@pytest.fixture(scope="module")
def event_validator() -> jsonschema.Draft202012Validator:
    """A validator for agentruntime-event.schema.json, checking formats too."""
    return event_schema_validator()


async def test_scenario_events_validate(
    start_worker, temporal_client, scripted_server, event_validator
):
    """Events of tools, errors, queueing, warnings, retries and terminate are all valid."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {
                    "match": "flaky",
                    "replies": [{"text": "recovered", "error": {"status": 503}, "times": 1}],
                },
                {
                    "match": "*",
                    "replies": [
                        {
                            "tool_calls": [
                                {"name": "weather", "arguments": {"city": "Lima"}},
                                {"name": "explode", "arguments": {"text": "x"}},
                            ],
                            "delay_ms": 200,
                        },
                        {"text": "All done, with one failure.", "chunk_size": 3},
                    ],
                },
            ]
        },
    )
    worker = await start_worker(agent_definitions(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": "go"}]
    )
    await wait_until(handle, lambda s: s.status == "running")
    await handle.signal("queue_message", {"role": "user", "content": 7})  # a warning
    await wait_until(handle, idle_after(1))
    await handle.signal("queue_message", {"role": "user", "content": "flaky"})
    await wait_until(handle, idle_after(2), timeout=60)
    await handle.signal("terminate", {"reason": "end of test"})
    ThreadResult.model_validate(await handle.result())

    events = worker.store.events.read(handle.id, limit=10_000)
    wire = [e.to_wire() for e in events]
    for event in wire:
        errors = sorted(event_validator.iter_errors(event), key=lambda e: e.path)
        assert not errors, f"{event['type']} is invalid: {errors[0].message}"
    assert [e["sequence"] for e in wire] == list(range(1, len(wire) + 1))
    assert len({e["eventId"] for e in wire}) == len(wire)
    types = {e["type"] for e in wire}
    for expected in (
        "thread.started",
        "thread.updated",
        "turn.started",
        "turn.completed",
        "model.requested",
        "model.delta",
        "model.completed",
        "model.failed",
        "tool.started",
        "tool.result",
        "tool.failed",
        "queue.changed",
        "runtime.warning",
    ):
        assert expected in types, f"no {expected} event"
    retried = [e for e in wire if e["type"] == "model.requested" and e["payload"]["reset"]]
    assert retried, "the retried model call did not announce an attempt reset"
    final = next(
        m
        for m in worker.store.messages.list(handle.id)
        if m.content == "All done, with one failure."
    )
    step = final.metadata["stepId"]
    streamed = "".join(
        e["payload"]["text"] for e in wire if e["type"] == "model.delta" and e.get("stepId") == step
    )
    assert streamed == final.content, "the streamed deltas do not add up to the stored reply"
