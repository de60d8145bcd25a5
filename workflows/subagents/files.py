"""Copying attachments between thread filesystems (Runtime §8.1), with the `files.copy`
activity; a failed copy is a tool error, never a failed workflow."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from weft.contract.activities import ACTIVITY_FILES_COPY, CopyFilesInput, CopyFilesResult
from weft.workflows import ui_summaries
from weft.workflows.failures import failure_text

# A store that is down for longer than these attempts fails the copy, not the thread.
COPY_ATTEMPTS = 10


class MissingFile(Exception):
    """Attachments that could not be copied: a path missing in the source thread, or a
    copy that failed past its retries."""


async def copy_files(source: str, target: str, paths: list[str], copy_id: str) -> list[str]:
    """Copy `paths` of thread `source` into thread `target`; the copies' paths there."""
    if not paths:
        return []
    try:
        result: CopyFilesResult = await workflow.execute_activity(
            ACTIVITY_FILES_COPY,
            CopyFilesInput(
                source_thread_id=source, target_thread_id=target, paths=paths, copy_id=copy_id
            ),
            result_type=CopyFilesResult,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=RetryPolicy(maximum_attempts=COPY_ATTEMPTS),
            summary=ui_summaries.files_copy(source, target, paths),
        )
    except ActivityError as err:
        # Never fail the workflow over a copy: the caller turns this into a tool error.
        cause = err.cause
        if isinstance(cause, ApplicationError) and cause.type == "FileNotFound":
            raise MissingFile(cause.message) from None
        raise MissingFile(f"attachments could not be copied: {failure_text(err)}") from None
    return result.paths
