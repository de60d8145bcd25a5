"""Whether a log holds the writes of a run newer than a given one, by the log's own order.

A reader that records the end of a run closed through Temporal (client/run_close.py)
describes the workflow first and writes a moment later. If that run had written its own
end before it was closed, the task (or job) could be retried in between, and the new run's
first events would be in the log by the time the reader writes: the closed run's end
would then end the new run's task. Each task and job event carries the `runId` of the run
that wrote it, so the log itself says which run wrote last, with no clock compared.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, select

from weft.store.tables import events

_PAGE = 64


def written_after_run(connection: Connection, log_id: str, run_id: str) -> bool:
    """Whether log `log_id` holds an event of another run stored after the last event of
    run `run_id`. False when `run_id` wrote nothing there: a run closed before its first
    write leaves the log to the run before it, which the idempotent end ids already guard.
    Reads back from the log's end, a page at a time, until the run's last event (a retry
    writes a few events before anything could race it)."""
    others = False
    before: int | None = None
    while True:
        query = select(events.c.sequence, events.c.data).where(events.c.thread_id == log_id)
        if before is not None:
            query = query.where(events.c.sequence < before)
        page = connection.execute(query.order_by(events.c.sequence.desc()).limit(_PAGE)).all()
        for sequence, data in page:
            writer = _run_of(data)
            if writer == run_id:
                return others
            others = others or writer is not None
            before = sequence
        if len(page) < _PAGE:
            return False


def _run_of(data: Any) -> str | None:
    run = data.get("runId") if isinstance(data, dict) else None
    return run if isinstance(run, str) else None


__all__ = ["written_after_run"]
