"""`weft job status --watch`'s progress: a bar redrawn in place on a terminal, a plain
line per change elsewhere, with items/s and the time left; the exit code by how the job
ended."""

from __future__ import annotations

import asyncio
import io
from collections.abc import AsyncIterator
from typing import Any

from weft.cli.job_command import ProgressView, _watch, progress_bar
from weft.contract.jobs import JobRecord

AT = "2026-11-27T10:00:00.000Z"


def _record(status: str = "running", reason: str | None = None, **counts: int) -> JobRecord:
    total = counts.pop("total")
    return JobRecord.model_validate(
        {
            "jobId": "job-0123456789ab",
            "assignee": "helper",
            "status": status,
            "reason": reason,
            "createdAt": AT,
            "updatedAt": AT,
            "counts": {"total": total, **counts},
        }
    )


class _Clock:
    def __init__(self, *times: float) -> None:
        self._times = list(times)

    def __call__(self) -> float:
        return self._times.pop(0)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bar_cells_by_where_items_stand() -> None:
    record = _record(total=10, completed=4, failed=1, running=2, pending=3)
    line = progress_bar(record, None, width=10)
    assert line == (
        "job-0123456789ab [####x>>...]  50% 5/10 done: 4 completed, 1 failed, 2 running, 3 pending"
    )
    # The bar keeps its width whatever the proportions (largest remainders).
    odd = progress_bar(_record(total=3, completed=1, running=1, pending=1), None, width=10)
    assert len(odd.split("[")[1].split("]")[0]) == 10


def test_terminal_redraws_one_line_in_place() -> None:
    out = _Terminal()
    view = ProgressView(out, terminal=True, clock=_Clock(100.0, 102.0, 104.0))
    view.show(_record(total=8, pending=8))
    view.show(_record(total=8, completed=4, running=2, pending=2))
    view.show(_record("failed", "1 failed of 8 items", total=8, completed=7, failed=1))
    text = out.getvalue()
    frames = text.split("\r")[1:]
    assert len(frames) == 3 and text.count("\n") == 1 and text.endswith("\n")
    assert "0% 0/8 done:" in frames[0] and "items/s" not in frames[0]
    # 4 items in 2 s: 2.0 items/s, 4 left: 2 s.
    assert "50% 4/8 done:" in frames[1] and "2.0 items/s · ETA 2s" in frames[1]
    assert frames[2].startswith("job-0123456789ab [" + "#" * 26 + "xxxx]")
    assert "100% 8/8 done:" in frames[2] and "ETA" not in frames[2]
    assert frames[2].rstrip("\n").endswith("· failed — 1 failed of 8 items")
    # A shorter frame blanks what a longer one left on the line.
    for before, after in zip(frames, frames[1:], strict=False):
        assert len(after.rstrip("\n")) >= len(before)


def test_elsewhere_a_plain_line_per_change() -> None:
    out = io.StringIO()
    view = ProgressView(out, terminal=False, clock=_Clock(0.0, 10.0, 20.0))
    view.show(_record(total=100, completed=50, pending=50))
    view.show(_record(total=100, completed=60, running=5, pending=35))
    view.show(_record("completed", total=100, completed=100))
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "[" not in out.getvalue()
    assert lines[0] == (
        "job-0123456789ab running: 50/100 done (50 completed, 0 failed, 0 cancelled), "
        "0 running, 50 pending"
    )
    # Items ended before watching began are not counted in the rate: 10 in 10 s.
    assert lines[1].endswith("35 pending · 1.0 items/s · ETA 40s")
    assert lines[2].startswith("job-0123456789ab completed: 100/100 done")
    assert lines[2].endswith("· 2.5 items/s")


class _Jobs:
    def __init__(self, *records: JobRecord) -> None:
        self._records = records

    async def watch(self, job_id: str) -> AsyncIterator[JobRecord]:
        for record in self._records:
            yield record


def test_watch_exits_by_how_the_job_ended() -> None:
    running = _record(total=2, running=2)
    for ended, code in (
        (_record("completed", total=2, completed=2), 0),
        (_record("failed", "1 failed of 2 items", total=2, completed=1, failed=1), 1),
        (_record("cancelled", total=2, cancelled=2), 1),
    ):
        out = io.StringIO()
        jobs: Any = _Jobs(running, ended)
        assert asyncio.run(_watch(jobs, "job-0123456789ab", out)) == code
        assert len(out.getvalue().splitlines()) == 2
