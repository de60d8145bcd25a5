"""A queued message measured on arrival is not encoded again when a step drains it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from unit_support import memory

from weft.contract.messages import QueuedMessage
from weft.workflows import intake as intake_module
from weft.workflows.intake import Intake
from weft.workflows.payload_size import encoded_size
from weft.workflows.queue import ThreadQueue


def test_take_says_which_entries_were_measured_on_arrival() -> None:
    queue = ThreadQueue(memory())
    checked = queue.add_message(QueuedMessage(role="user", content="a"), measured=True)
    unchecked = queue.add_message(QueuedMessage(role="user", content="b"))
    assert queue.take() == (checked, True)
    assert queue.take() == (unchecked, False)


def test_the_drain_measures_only_what_arrival_did_not(monkeypatch: pytest.MonkeyPatch) -> None:
    mem = memory(options={"payloadBudgetBytes": 16_384})
    queue = ThreadQueue(mem)
    queue.add_message(QueuedMessage(role="user", content="signalled"), measured=True)
    # The start input's messages are not measured on arrival: one too large is refused here.
    queue.add_message(QueuedMessage(role="user", content="x" * 20_000))
    measured: list[Any] = []

    def counting(value: Any) -> int:
        measured.append(value)
        return encoded_size(value)

    monkeypatch.setattr(intake_module, "encoded_size", counting)
    drained = asyncio.run(Intake(mem, queue, tools=None).drain("a", "turn_1", "step_1"))  # type: ignore[arg-type]
    assert [m.content for m in drained.messages] == ["signalled"]
    assert (
        len(drained.oversized) == 1 and "over the thread's payload budget" in drained.oversized[0]
    )
    assert [m.content[:1] for m in measured] == ["x", "x"]  # the check, then its error text
