"""Thread options Temporal cannot hold are refused by the start input, naming the field,
instead of failing every workflow task of a thread that then never moves."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from weft.contract.thread import MAX_OPTION_ATTEMPTS, MAX_OPTION_SECONDS, ThreadStartInput


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("modelTimeoutSeconds", 1e300),
        ("toolTimeoutSeconds", MAX_OPTION_SECONDS + 1),
        ("heartbeatTimeoutSeconds", 1e300),
        ("modelMaxAttempts", MAX_OPTION_ATTEMPTS + 1),
        ("toolMaxAttempts", 10**30),
        ("continueAsNewIdleSeconds", MAX_OPTION_SECONDS + 1),
        ("continueAsNewIdleSeconds", 0),
    ],
)
def test_options_past_what_temporal_holds_are_refused(field: str, value: float) -> None:
    with pytest.raises(ValidationError) as refused:
        ThreadStartInput.model_validate({"agent": "a", "options": {field: value}})
    assert [error["loc"] for error in refused.value.errors()] == [("options", field)]


def test_the_largest_allowed_options_are_kept() -> None:
    start = ThreadStartInput.model_validate(
        {
            "agent": "a",
            "options": {
                "modelTimeoutSeconds": MAX_OPTION_SECONDS,
                "modelMaxAttempts": MAX_OPTION_ATTEMPTS,
            },
        }
    )
    assert start.options.model_timeout_seconds == MAX_OPTION_SECONDS
    assert start.options.model_max_attempts == MAX_OPTION_ATTEMPTS
