"""The worker's garbage-collection policy: start-up objects frozen out, once per process."""

from __future__ import annotations

import gc

import pytest

from weft.workers import gc_policy
from weft.workers.config import WorkerConfig


def test_the_startup_heap_is_frozen_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first call freezes what is alive (after a collection); later calls do nothing."""
    monkeypatch.setattr(gc_policy, "_frozen", False)
    frozen = gc_policy.freeze_startup_heap()
    # A frozen object another thread lets go of is freed and leaves the count (CI saw 7 of
    # 1.36 million between two reads): the count only falls, unless something froze again.
    assert frozen > 0 and 0 < gc.get_freeze_count() <= frozen
    assert gc_policy.freeze_startup_heap() == 0
    assert gc.get_freeze_count() <= frozen


def test_on_by_default_and_can_be_turned_off() -> None:
    assert WorkerConfig().gc_freeze is True
    assert WorkerConfig.model_validate({"gcFreeze": False}).gc_freeze is False
