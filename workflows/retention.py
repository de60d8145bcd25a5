"""`RetentionSweep`: delete the closed threads past their TTL (docs/deletion.md, "Retention").

A sweep reads expired threads in batches (`retention.find`, oldest close first, from a
cursor) and deletes each with its children (`retention.delete`), a few at once. Its clock
is fixed when it starts (or given, `now`), so every batch asks the same question. After
`batchesPerRun` batches it continues as new, carrying the cursor and its counts only, so
history stays bounded at any number of threads. A deletion that fails past its retries is
counted and named in the result; the thread stays, and the next sweep tries it again.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.retention import (
    ACTIVITY_RETENTION_DELETE,
    ACTIVITY_RETENTION_FIND,
    RESULT_ID_LIMIT,
    RETENTION_WORKFLOW_TYPE,
    ExpiredThread,
    RetentionBatch,
    RetentionDeleted,
    RetentionDeleteInput,
    RetentionFindInput,
    RetentionSweepInput,
    RetentionSweepResult,
)
from weft.contract.validation import describe_validation_error
from weft.workflows.failures import failure_text

INVALID_SWEEP_INPUT = "InvalidRetentionSweepInput"
_FIND_TIMEOUT = timedelta(seconds=60)
_DELETE_HEARTBEAT = timedelta(seconds=30)
# Closing a running child (its grace, then terminate) and waiting for Temporal to forget
# each thread (up to 60 s, client/deletion.py), with room for a tree of a few threads.
_DELETE_BASE = timedelta(minutes=5)
_DELETE_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1))


@workflow.defn(name=RETENTION_WORKFLOW_TYPE)
class RetentionSweepWorkflow:
    """Delete every closed thread past its TTL; returns what was deleted."""

    @workflow.run
    async def run(self, raw: Any = None) -> dict[str, Any]:
        try:
            sweep = RetentionSweepInput.model_validate(raw or {})
        except ValidationError as err:
            raise ApplicationError(
                f"invalid RetentionSweep input: {describe_validation_error(err)}",
                type=INVALID_SWEEP_INPUT,
                non_retryable=True,
            ) from None
        if sweep.now is None:
            sweep.now = workflow.now()
        for _ in range(sweep.batches_per_run):
            batch: RetentionBatch = await workflow.execute_activity(
                ACTIVITY_RETENTION_FIND,
                RetentionFindInput(now=sweep.now, cursor=sweep.cursor, limit=sweep.batch_size),
                result_type=RetentionBatch,
                start_to_close_timeout=_FIND_TIMEOUT,
                summary="find closed threads past their TTL",
            )
            if not batch.threads:
                return _result(sweep)
            sweep.expired += len(batch.threads)
            for start in range(0, len(batch.threads), sweep.parallel):
                chunk = batch.threads[start : start + sweep.parallel]
                for outcome in await asyncio.gather(*(_delete(sweep, t) for t in chunk)):
                    _tally(sweep, outcome)
            sweep.cursor = batch.cursor
            if len(batch.threads) < sweep.batch_size:
                return _result(sweep)  # a short batch was the last
        workflow.continue_as_new(
            sweep.model_copy(update={"run": sweep.run + 1}).model_dump(mode="json")
        )


async def _delete(sweep: RetentionSweepInput, thread: ExpiredThread) -> RetentionDeleted:
    """One expired thread deleted, or why not once its retries are spent."""
    try:
        deleted: RetentionDeleted = await workflow.execute_activity(
            ACTIVITY_RETENTION_DELETE,
            RetentionDeleteInput(thread=thread, grace_seconds=sweep.grace_seconds),
            result_type=RetentionDeleted,
            start_to_close_timeout=_DELETE_BASE + timedelta(seconds=sweep.grace_seconds),
            heartbeat_timeout=_DELETE_HEARTBEAT,
            retry_policy=_DELETE_RETRY,
            summary=f"delete {thread.thread_id} (closed {thread.closed_at:%Y-%m-%d %H:%M}Z)",
        )
    except ActivityError as err:
        return RetentionDeleted(thread_id=thread.thread_id, error=failure_text(err.cause or err))
    return deleted


def _tally(sweep: RetentionSweepInput, outcome: RetentionDeleted) -> None:
    if outcome.error is not None:
        sweep.failures += 1
        if len(sweep.failed) < RESULT_ID_LIMIT:
            sweep.failed.append(outcome)
        return
    if outcome.gone:
        sweep.gone += 1
    sweep.deleted += len(outcome.deleted)
    room = RESULT_ID_LIMIT - len(sweep.deleted_ids)
    sweep.deleted_ids.extend(outcome.deleted[: max(room, 0)])


def _result(sweep: RetentionSweepInput) -> dict[str, Any]:
    assert sweep.now is not None
    return RetentionSweepResult(
        now=sweep.now,
        runs=sweep.run,
        expired=sweep.expired,
        deleted=sweep.deleted,
        gone=sweep.gone,
        failures=sweep.failures,
        failed=sweep.failed,
        deleted_ids=sweep.deleted_ids,
    ).model_dump(mode="json")


__all__ = ["INVALID_SWEEP_INPUT", "RetentionSweepWorkflow"]
