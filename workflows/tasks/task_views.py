"""What every part of the `TaskRun` workflow reads of the run itself.

The workflow satisfies it; a part declares, in its own module, a view of the other parts it
reads (properties) so that who assigns what is answered by the part that owns it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from weft.workflows.tasks.task_log import TaskLog


class RunFacts(Protocol):
    """The run's log (None until the run has read its input), whether it runs with the
    task commands (`TASK_COMMANDS_PATCH`, asked at its first activation) and may continue
    as new, and its rests: the waits it may continue as new from (`task_continuation.py`)."""

    @property
    def log(self) -> TaskLog | None: ...

    @property
    def commands(self) -> bool: ...

    @property
    def continues(self) -> bool:
        """Whether the run may continue as new (`CONTINUE_AS_NEW_PATCH`, asked at its
        first activation)."""

    async def rest(self, until: Callable[[], bool], timeout: timedelta | None = None) -> None:
        """Wait for `until()` (TimeoutError after `timeout`); ContinueHere when the run
        continues as new from this wait instead."""

    async def checkpoint(self) -> None:
        """Between attempts: ContinueHere when the run continues as new from here."""
