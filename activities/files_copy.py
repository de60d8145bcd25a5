"""`files.copy`: attachments cross thread boundaries as copies (Runtime §8.1, §8.2).

A path of one thread is meaningless in another, so the workflow copies the files a parent
hands to a child, or a child reports to its parent, and passes on the new paths.
"""

from __future__ import annotations

import asyncio

from temporalio import activity
from temporalio.exceptions import ApplicationError

from weft.contract.activities import ACTIVITY_FILES_COPY, CopyFilesInput, CopyFilesResult
from weft.store import Store, StoreLimitError
from weft.store.file_paths import InvalidPathError


class FileCopyActivities:
    """Copies between thread filesystems; bytes stay shared, only rows are written."""

    def __init__(self, store: Store) -> None:
        self._store = store

    @activity.defn(name=ACTIVITY_FILES_COPY)
    async def copy_files(self, copy: CopyFilesInput) -> CopyFilesResult:
        """Copy `copy.paths` into the target thread; a retry returns the same paths.

        A missing source, a directory or a bad path cannot succeed on retry: those fail
        non-retryable (`FileNotFound`, `InvalidPath`, `FileLimit`) so the workflow can report them.
        """
        try:
            paths = await asyncio.to_thread(
                self._store.files.copy_files,
                copy.source_thread_id,
                copy.target_thread_id,
                copy.paths,
                target_dir=copy.target_dir,
                copy_id=copy.copy_id,
            )
        except FileNotFoundError as error:
            raise ApplicationError(str(error), type="FileNotFound", non_retryable=True) from None
        except (InvalidPathError, IsADirectoryError, NotADirectoryError) as error:
            raise ApplicationError(str(error), type="InvalidPath", non_retryable=True) from None
        except StoreLimitError as error:
            raise ApplicationError(str(error), type="FileLimit", non_retryable=True) from None
        return CopyFilesResult(paths=paths)
