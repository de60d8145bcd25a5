"""Structured output: a prompt's final answer must be JSON valid against its requiredSchema.

The adapters ask the provider for it (OpenAI `response_format`, an Anthropic forced tool);
this checks what came back, inside `model.call`. An invalid answer fails the attempt with
a retryable `StructuredOutputInvalid` (a model's answers vary, so asking again can help);
from attempt `STRUCTURED_OUTPUT_ATTEMPTS` on it is final, so the model's fallbacks and then
the turn's `step_error` carry the validation message. A reply that calls tools is not the
final answer yet and is not checked.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import exceptions, validators

from weft.activities.providers import ChatReply, ChatRequest
from weft.activities.providers.errors import excerpt, structured_output_invalid

STRUCTURED_OUTPUT_ATTEMPTS = 3


def checked_reply(request: ChatRequest, reply: ChatReply, *, attempt: int) -> ChatReply:
    """`reply` with its parsed answer, or the error the attempt fails with."""
    schema = request.response_schema
    if schema is None or reply.tool_calls:
        return reply
    try:
        parsed = parse_answer(schema, reply.content or "")
    except ValueError as exc:
        problem = str(exc)
        if reply.finish_reason == "length":
            problem += " (the reply was cut off at the model's output limit)"
        last = attempt >= STRUCTURED_OUTPUT_ATTEMPTS
        raise structured_output_invalid(problem, last_attempt=last) from None
    return reply.model_copy(update={"parsed": parsed})


def parse_answer(schema: dict[str, Any], text: str) -> dict[str, Any]:
    """The object `text` holds, or a ValueError saying how it breaks `schema`."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"it is not JSON ({exc}): {excerpt(text, 200) or '(empty)'}") from None
    validator = validators.validator_for(schema)(schema)
    error = exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise ValueError(f"at {where}: {error.message}")
    if not isinstance(value, dict):  # start-up checks make the root an object
        raise ValueError(f"it is not a JSON object: {excerpt(text, 200)}")
    return value
