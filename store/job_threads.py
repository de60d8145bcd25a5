"""The jobs that belong to threads (`JobSpec.thread_id`, docs/jobs.md), for the threads'
`subagent_job_summary`.

The link is the job record's `threadId`, set at creation and stated by its `job.created`;
it is read from the `jobs` rows' JSON without an index, as the tasks a thread created are
(store/subagents.py): a scan of the jobs rows, one per job (not per item).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from weft.contract.jobs import JobRecord
from weft.store.database import Database
from weft.store.jobs import jobs


def jobs_of_threads(database: Database, thread_ids: Sequence[str]) -> list[JobRecord]:
    """The jobs whose `threadId` is one of `thread_ids`, oldest first."""
    if not thread_ids:
        return []
    owner = jobs.c.data["threadId"].as_string()
    query = (
        select(jobs.c.data)
        .where(owner.in_(list(thread_ids)))
        .order_by(jobs.c.created_at, jobs.c.job_id)
    )
    with database.read() as connection:
        return [JobRecord.model_validate(data) for data in connection.scalars(query)]


__all__ = ["jobs_of_threads"]
