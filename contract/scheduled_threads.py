"""What an `--agent` schedule's run carries (workflows/scheduled_thread.py), and the memo
keys that tie a schedule, its runs and the threads they start together."""

from __future__ import annotations

from pydantic import Field

from weft.contract.thread import ThreadStartInput
from weft.contract.wire import CamelModel

SCHEDULED_THREAD_TYPE = "ScheduledThreadStart"
# The memo key on every workflow a schedule starts, and on the threads its runs start:
# the schedule's name.
RUN_MEMO = "weftScheduledBy"
# The memo key on a `ScheduledThreadStart` run: the id of the thread it started.
THREAD_MEMO = "weftThread"


class ScheduledThreadInput(CamelModel):
    """One run of an `--agent` schedule: start a thread with `start`, on behalf of
    `schedule`; with `wait_for_close`, stay open until that thread closes, so the
    schedule's overlap policy (skip, buffer, cancel or terminate the previous run) is
    about the thread, not about this run's few milliseconds."""

    schedule: str = Field(min_length=1)
    start: ThreadStartInput
    wait_for_close: bool = False
