"""Control-plane payload validation: clear errors naming what is wrong."""

from __future__ import annotations

import pytest

from weft.contract.messages import QueuedMessage
from weft.workflows.control import InvalidPayload, parse_single


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([], "queue_message takes exactly one JSON object argument, got 0"),
        ([{}, {}], "queue_message takes exactly one JSON object argument, got 2"),
        (["hi"], "queue_message takes a JSON object, got a string"),
        ([None], "queue_message takes a JSON object, got null"),
        ([[1]], "queue_message takes a JSON object, got an array"),
        ([True], "queue_message takes a JSON object, got a boolean"),
        ([3], "queue_message takes a JSON object, got a number"),
    ],
)
def test_the_wrong_shape_is_named(args: list[object], expected: str) -> None:
    """Each malformed argument list is refused with what it was instead."""
    with pytest.raises(InvalidPayload) as err:
        parse_single("queue_message", args, QueuedMessage)
    assert str(err.value) == expected


def test_a_bad_field_is_named() -> None:
    """A field-level error names the field."""
    with pytest.raises(InvalidPayload, match="role"):
        parse_single("queue_message", [{"role": "robot", "content": "x"}], QueuedMessage)
    parsed = parse_single("queue_message", [{"role": "user", "content": "x"}], QueuedMessage)
    assert parsed.content == "x"
