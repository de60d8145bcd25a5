"""Starting a step's activity within the payload budget, with weft's retry policy.

Temporal refuses a payload over 2 MB by failing the workflow task forever, so every
activity input that carries messages is measured first; when it is too big, what it
carries is written by the local `store.flush` (whose input never reaches history) and the
activity is started with ids only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from pydantic import BaseModel
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ActivityCancellationType

from weft.contract.events import Event
from weft.contract.messages import Message
from weft.contract.thread import ThreadOptions
from weft.workflows.outbox import Outbox
from weft.workflows.payload_size import encoded_size
from weft.workflows.views import Pending, Starts

Input = TypeVar("Input", bound=BaseModel)
Result = TypeVar("Result")


@dataclass
class Carried:
    """Events and messages an activity input carries to the store."""

    events: list[Event] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)

    def give_back(self, mem: Pending) -> None:
        """The activity failed: keep what it carried for the next one, in order."""
        mem.return_outbox(self.events)
        mem.return_messages(self.messages)


@dataclass(frozen=True)
class Limits:
    """Timeouts and attempts of one kind of step activity."""

    timeout_seconds: float
    heartbeat_seconds: float
    max_attempts: int

    @classmethod
    def of_models(cls, options: ThreadOptions) -> Limits:
        return cls(
            options.model_timeout_seconds,
            options.heartbeat_timeout_seconds,
            options.model_max_attempts,
        )

    @classmethod
    def of_tools(cls, options: ThreadOptions) -> Limits:
        return cls(
            options.tool_timeout_seconds,
            options.heartbeat_timeout_seconds,
            options.tool_max_attempts,
        )


async def start_within_budget(
    mem: Starts,
    outbox: Outbox,
    activity: str,
    payload: Input,
    carried: Carried,
    *,
    without_carried: dict[str, Any],
    result_type: type[Result],
    limits: Limits,
    summary: str | None = None,
    wait_for_cancel: bool = False,
    local: bool = False,
) -> tuple[workflow.ActivityHandle[Result], Carried]:
    """Start `activity`; when `payload` is over the thread's payload budget, persist what it
    carries first.

    `without_carried` is the update that empties the payload's carried fields; `summary` is
    the one line the Temporal UI shows for it (workflows/ui_summaries.py). With
    `wait_for_cancel`, cancelling the handle waits until the activity has stopped (or timed
    out), so what the thread records next is true of it. Returns the handle and what the
    started input still carries (nothing, after persisting).

    `local` runs it as a local activity on this worker, inside the workflow task: no
    round trip to the server and no workflow task of its own, but no heartbeat either (a
    lost worker is noticed by the workflow task's timeout, and the call runs again).
    """
    if encoded_size(payload) > mem.start.options.payload_budget_bytes:
        await outbox.persist_first(carried.events, carried.messages)
        carried = Carried()
        payload = payload.model_copy(update=without_carried)
    outbox.show_details()
    cancellation_type = (
        ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        if wait_for_cancel
        else ActivityCancellationType.TRY_CANCEL
    )
    retry_policy = RetryPolicy(
        initial_interval=timedelta(seconds=1),
        maximum_interval=timedelta(seconds=30),
        maximum_attempts=limits.max_attempts,
    )
    timeout = timedelta(seconds=limits.timeout_seconds)
    if local:
        # Not watched by the history gauge: the activation a local activity resumes is
        # no safe place to read the history's length (workflows/history_gauge.py).
        local_handle: workflow.ActivityHandle[Result] = workflow.start_local_activity(
            activity,
            payload,
            result_type=result_type,
            summary=summary,
            cancellation_type=cancellation_type,
            start_to_close_timeout=timeout,
            retry_policy=retry_policy,
        )
        return local_handle, carried
    handle = workflow.start_activity(
        activity,
        payload,
        result_type=result_type,
        summary=summary,
        cancellation_type=cancellation_type,
        start_to_close_timeout=timeout,
        heartbeat_timeout=timedelta(seconds=limits.heartbeat_seconds),
        retry_policy=retry_policy,
    )
    mem.history.watch(handle)
    return handle, carried
