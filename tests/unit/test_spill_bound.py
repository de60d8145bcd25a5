"""A message short enough that it cannot be over the spill threshold skips the store (and
its thread hop); the bound holds for the widest UTF-8 characters."""

from __future__ import annotations

from weft.activities.spill import SPILL_THRESHOLD_BYTES, may_spill

WIDEST = "\U0001f600"  # four bytes in UTF-8


def test_text_that_may_not_spill_is_never_over_the_threshold() -> None:
    at_most = WIDEST * (SPILL_THRESHOLD_BYTES // 4)
    assert len(at_most.encode("utf-8")) == SPILL_THRESHOLD_BYTES
    assert not may_spill(at_most)
    assert may_spill(at_most + "a")
    assert not may_spill("a short question")
    assert may_spill("a" * (SPILL_THRESHOLD_BYTES + 1))
