"""The history gauge keeps the reading of the last regular activity that resolved from
history, never one taken after a cancel; and its thresholds are the thread's options."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import temporalio.workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError, RetryState

from weft.contract.thread import ThreadOptions
from weft.workflows import history_gauge
from weft.workflows.history_gauge import HistoryGauge, HistoryReading


def reading(events: int, size_bytes: int = 0, suggested: bool = False) -> HistoryReading:
    return HistoryReading(events=events, size_bytes=size_bytes, suggested=suggested)


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[HistoryReading]]:
    """What the 'current activation' reports: the last item of the list."""
    reports = [reading(10)]
    monkeypatch.setattr(history_gauge, "live_reading", lambda: reports[-1])
    yield reports


def activity_error(cause: BaseException) -> ActivityError:
    err = ActivityError(
        "activity failed",
        scheduled_event_id=5,
        started_event_id=6,
        identity="test",
        activity_type="tool.call",
        activity_id="1",
        retry_state=RetryState.NON_RETRYABLE_FAILURE,
    )
    err.__cause__ = cause
    return err


async def test_a_resolved_activity_reads_and_a_cancelled_one_does_not(
    live: list[HistoryReading],
) -> None:
    gauge = HistoryGauge()
    gauge.read()
    assert gauge.last == reading(10)
    loop = asyncio.get_running_loop()

    done, failed, cancelled, cancelled_by_temporal = (loop.create_future() for _ in range(4))
    for handle in (done, failed, cancelled, cancelled_by_temporal):
        gauge.watch(handle)

    live.append(reading(40))
    done.set_result("ok")
    await asyncio.sleep(0)
    assert gauge.last == reading(40)

    live.append(reading(55))
    failed.set_exception(activity_error(ApplicationError("boom")))
    await asyncio.sleep(0)
    assert gauge.last == reading(55)

    # A cancel resolves in a later activation of the same task: not a reading to keep.
    live.append(reading(99))
    cancelled.cancel()
    cancelled_by_temporal.set_exception(activity_error(CancelledError("cancelled")))
    await asyncio.sleep(0)
    assert gauge.last == reading(55)
    with pytest.raises(ActivityError):  # the awaiting code still sees the outcome
        cancelled_by_temporal.result()


def test_long_by_events_by_size_or_by_temporal_suggestion() -> None:
    options = ThreadOptions(continue_as_new_events=100, continue_as_new_bytes=64 * 1024)
    assert not reading(99, 64 * 1024 - 1).is_long(options)
    assert reading(100).is_long(options)
    assert reading(1, 64 * 1024).is_long(options)
    assert reading(1, suggested=True).is_long(options)


def test_grown_counts_what_the_run_added_since_it_started(
    live: list[HistoryReading], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The idle continue-as-new asks how much the run itself added: a continued run starts
    with its own short history, not at zero, and only later readings count."""
    monkeypatch.setattr(temporalio.workflow, "patched", lambda _patch_id: True)
    gauge = HistoryGauge()
    gauge.start()
    assert gauge.in_use
    assert gauge.grown() == 0
    live.append(reading(35))
    gauge.read()
    assert gauge.grown() == 25
