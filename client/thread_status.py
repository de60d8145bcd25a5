"""One vocabulary for a thread's status, shared by `weft thread list`, `GET /threads`, the
closed-thread messages of the CLI and the HTTP API, and `weft thread tail` (docs/thread-status.md).

Temporal knows whether a thread's workflow runs and how it closed; weft records what an
open thread is doing in the `WeftStatus` search attribute. A user sees one word built from
both, and filters by the same words. A weft thread's workflow completes only when it is
terminated (weft's soft terminate), so Temporal's `Completed` reads `terminated` here, as
do its own terminate and cancel: the thread was stopped.
"""

from __future__ import annotations

from typing import Literal, get_args

from temporalio.client import WorkflowExecutionStatus

from weft.contract.thread import WORKFLOW_TYPE

# What one thread shows: open ones first, then how a closed one ended.
ThreadState = Literal[
    "preparing",
    "running",
    "waiting_input",
    "waiting_permission",
    "terminated",
    "failed",
    "timed_out",
]
# What a listing may filter by: every state, and `closed` (any closed thread). `running` is
# every open thread, whatever it is doing, so it also lists the waiting ones.
StatusFilter = Literal[
    "running",
    "preparing",
    "waiting_input",
    "waiting_permission",
    "closed",
    "terminated",
    "failed",
    "timed_out",
]
STATUS_FILTERS: tuple[str, ...] = get_args(StatusFilter)

STATUS_MEANINGS: dict[str, str] = {
    "running": "open, whatever it is doing (the waiting ones included)",
    "preparing": "open, still loading its definitions",
    "waiting_input": "open and idle: waits for a message or a person's answer",
    "waiting_permission": "open: waits for a person to approve or deny a tool",
    "closed": "closed, however it ended",
    "terminated": "closed by terminate (weft's, a tool's, its parent's) or Temporal's",
    "failed": "closed by a failure (refused at start: an unknown agent, a missing variable)",
    "timed_out": "closed by its Temporal execution timeout",
}

# Each filter as visibility query text: fixed strings only, never request or argv text.
_OPEN = "ExecutionStatus = 'Running'"
STATUS_QUERIES: dict[str, str] = {
    "running": _OPEN,
    # Before its first workflow task a thread has no WeftStatus yet: it is preparing.
    "preparing": f"{_OPEN} AND (WeftStatus = 'preparing' OR WeftStatus IS NULL)",
    "waiting_input": f"{_OPEN} AND WeftStatus = 'waiting_input'",
    "waiting_permission": f"{_OPEN} AND WeftStatus = 'waiting_permission'",
    "closed": "ExecutionStatus != 'Running'",
    "terminated": "ExecutionStatus IN ('Completed', 'Terminated', 'Canceled')",
    "failed": "ExecutionStatus = 'Failed'",
    "timed_out": "ExecutionStatus = 'TimedOut'",
}


def threads_query(task_queue: str) -> str:
    """The threads of `task_queue`: AgentThread workflows, latest runs only (never a run
    that continued as new), as a visibility query."""
    if not (
        task_queue and all(c.isascii() and (c.isalnum() or c in "_.:@=+-") for c in task_queue)
    ):
        raise ValueError(f"task queue {task_queue!r}: letters, digits and _ . : @ = + - only")
    return (
        f"WorkflowType = '{WORKFLOW_TYPE}' AND TaskQueue = '{task_queue}' "
        "AND ExecutionStatus != 'ContinuedAsNew'"
    )


_CLOSED: dict[WorkflowExecutionStatus, ThreadState] = {
    WorkflowExecutionStatus.COMPLETED: "terminated",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.CANCELED: "terminated",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.TIMED_OUT: "timed_out",
}
_OPEN_STATES: tuple[ThreadState, ...] = ("preparing", "waiting_input", "waiting_permission")


def is_closed(execution: WorkflowExecutionStatus | None) -> bool:
    """True when the workflow has closed (a run that continued as new has not: the thread
    goes on in its next run)."""
    return execution in _CLOSED


def thread_state(execution: WorkflowExecutionStatus | None, weft_status: str | None) -> ThreadState:
    """The one word for a thread whose workflow is `execution` and whose `WeftStatus` is
    `weft_status` (None before its first workflow task)."""
    if execution in _CLOSED:
        return _CLOSED[execution]
    if weft_status is None:
        return "preparing"
    return next((s for s in _OPEN_STATES if s == weft_status), "running")


def closed_as(execution: WorkflowExecutionStatus) -> ThreadState:
    """How a closed thread ended: `terminated`, `failed` or `timed_out`."""
    return _CLOSED.get(execution, "running")


def closed_message(thread_id: str, execution: WorkflowExecutionStatus) -> str:
    """The line every surface says when an action meets a closed thread."""
    return f"thread {thread_id!r} is closed ({closed_as(execution)})"


def allowed_filters() -> str:
    """The filter values, comma-separated, for error messages and help."""
    return ", ".join(STATUS_FILTERS)


__all__ = [
    "STATUS_FILTERS",
    "STATUS_MEANINGS",
    "STATUS_QUERIES",
    "StatusFilter",
    "ThreadState",
    "allowed_filters",
    "closed_as",
    "closed_message",
    "is_closed",
    "thread_state",
    "threads_query",
]
