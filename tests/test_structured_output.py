"""Structured output (a prompt's requiredSchema) on the real dev server and scripted model.

The scripted model plays what a model might answer; `faulty_text` makes the first attempt
answer badly, as a model sometimes does, so the retry is a real second request.
"""

from __future__ import annotations

import json
from typing import Any

from support import add_script, event_schema_validator, idle_after, start_thread, wait_until

from weft.activities.structured_output import STRUCTURED_OUTPUT_ATTEMPTS
from weft.definitions import Definitions, define_agent, define_model, define_prompt

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["city", "celsius"],
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
}
ANSWER = {"city": "Lisbon", "celsius": 21}


def structured(script: str) -> Definitions:
    """A helper whose prompt requires SCHEMA, on the scripted model `script`."""
    return Definitions().add(
        define_model(name="scripted", provider="scripted", model=script),
        define_prompt(
            name="forecaster",
            toolDescription="forecasts",
            model="scripted",
            prompt="Answer with the forecast.",
            requiredSchema=SCHEMA,
        ),
        define_agent(name="helper", sideA={"prompt": "forecaster"}),
    )


async def _ask(start_worker: Any, temporal_client: Any, script: str, text: str) -> Any:
    worker = await start_worker(structured(script))
    handle = await start_thread(
        temporal_client, worker.task_queue, messages=[{"role": "user", "content": text}]
    )
    return worker, handle


async def test_valid_answer_is_parsed_onto_the_message(
    start_worker, temporal_client, scripted_server
):
    """A valid answer ends the turn; the parsed object is on the stored assistant message and
    the request asked for a strict json_schema response format."""
    script = add_script(scripted_server, {"replies": [{"text": json.dumps(ANSWER)}]})
    worker, handle = await _ask(start_worker, temporal_client, script, "Lisbon?")
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    reply = worker.store.messages.list(handle.id)[-1]
    assert reply.role == "assistant" and reply.metadata["parsed"] == ANSWER
    assert json.loads(reply.content or "") == ANSWER
    [request] = [r for r in scripted_server.requests if r["model"] == script]
    assert request["params"]["response_format"]["json_schema"]["schema"] == SCHEMA
    assert request["params"]["response_format"]["json_schema"]["strict"] is True


async def test_invalid_then_valid_answer_retries_the_call(
    start_worker, temporal_client, scripted_server
):
    """An answer that breaks the schema fails the attempt with a retryable
    StructuredOutputInvalid; the second attempt's valid answer is the one stored."""
    script = add_script(
        scripted_server,
        {
            "replies": [
                {
                    "text": json.dumps(ANSWER),
                    "faulty_text": json.dumps({"city": "Lisbon"}),
                    "times": 1,
                }
            ]
        },
    )
    worker, handle = await _ask(start_worker, temporal_client, script, "Lisbon?")
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    [failed] = worker.store.events.read(handle.id, types=["model.failed"])
    assert failed.payload["errorType"] == "StructuredOutputInvalid"
    assert failed.payload["retryable"] is True
    assert "'celsius' is a required property" in failed.payload["error"]
    requested = worker.store.events.read(handle.id, types=["model.requested"])
    assert [(e.payload["attempt"], e.payload["reset"]) for e in requested] == [
        (1, False),
        (2, True),
    ]
    assistants = [m for m in worker.store.messages.list(handle.id) if m.role == "assistant"]
    assert len(assistants) == 1 and assistants[0].metadata["parsed"] == ANSWER
    validator = event_schema_validator()
    for event in worker.store.events.read(handle.id, limit=1000):
        errors = list(validator.iter_errors(event.to_wire()))
        assert not errors, f"{event.type} is invalid: {errors[0].message}"


async def test_always_invalid_answer_ends_in_step_error(
    start_worker, temporal_client, scripted_server
):
    """An answer that stays invalid is asked for a bounded number of times, then the turn
    ends with step_error naming the validation problem; the thread takes the next message."""
    script = add_script(
        scripted_server,
        {
            "turns": [
                {"match": "again", "replies": [{"text": json.dumps(ANSWER)}]},
                {"match": "*", "replies": [{"text": "It is sunny in Lisbon."}]},
            ]
        },
    )
    worker, handle = await _ask(start_worker, temporal_client, script, "Lisbon?")
    state = await wait_until(
        handle,
        lambda s: s.status == "waiting_input" and s.stop_reason == "step_error",
        timeout=60,
    )
    assert "does not satisfy requiredSchema: it is not JSON" in (state.last_outcome or "")
    assert "It is sunny in Lisbon." in (state.last_outcome or "")
    failed = worker.store.events.read(handle.id, types=["model.failed"])
    assert [e.payload["retryable"] for e in failed] == [True] * (STRUCTURED_OUTPUT_ATTEMPTS - 1) + [
        False
    ]
    assert [m.role for m in worker.store.messages.list(handle.id)] == ["user"]

    await handle.signal("queue_message", {"role": "user", "content": "again"})
    # A turn that ended in step_error is not a completed turn.
    state = await wait_until(handle, idle_after(1))
    assert state.stop_reason == "stop_on_response"
    assert worker.store.messages.list(handle.id)[-1].metadata["parsed"] == ANSWER
