"""What every part of the `TaskRun` workflow reads of the run itself.

The workflow satisfies it; a part declares, in its own module, a view of the other parts it
reads (properties) so that who assigns what is answered by the part that owns it.
"""

from __future__ import annotations

from typing import Protocol

from weft.workflows.tasks.task_log import TaskLog


class RunFacts(Protocol):
    """The run's log (None until the run has read its input) and whether it runs with the
    task commands (`TASK_COMMANDS_PATCH`, asked at its first activation)."""

    @property
    def log(self) -> TaskLog | None: ...

    @property
    def commands(self) -> bool: ...
