"""`ScheduledDelivery`: how a Temporal Schedule queues a message to a standing thread.

A schedule can only start workflows, so each firing of a `weft schedule create --thread`
schedule starts this one: it signals `queue_message` to the thread and ends. A thread that
does not exist or is closed fails the run with an error naming the thread.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.exceptions import ApplicationError, FailureError

from weft.contract.schedules import SCHEDULED_DELIVERY_TYPE, ScheduledDeliveryInput
from weft.contract.thread import SIGNAL_QUEUE_MESSAGE
from weft.contract.validation import describe_validation_error

# Error types a failed delivery run carries (visible in the Temporal UI and `weft schedule`).
INVALID_DELIVERY = "InvalidScheduledDelivery"
THREAD_UNREACHABLE = "ScheduledThreadUnreachable"


@workflow.defn(name=SCHEDULED_DELIVERY_TYPE)
class ScheduledDeliveryWorkflow:
    """Queue one scheduled message to a thread, then end; returns the thread id."""

    @workflow.run
    async def run(self, delivery: Any = None) -> str:
        try:
            valid = ScheduledDeliveryInput.model_validate(delivery)
        except ValidationError as err:
            # Validated here, not by the converter: a decode failure there would fail the
            # workflow task forever, and with the schedule's SKIP policy block every later
            # delivery; a failed run is visible and ends.
            raise ApplicationError(
                f"invalid ScheduledDelivery input: {describe_validation_error(err)}",
                type=INVALID_DELIVERY,
                non_retryable=True,
            ) from None
        # Stamped here, so whoever starts a delivery, the reader can tell who sent it.
        message = valid.message.model_copy(
            update={"metadata": {**valid.message.metadata, "schedule": valid.schedule}}
        )
        thread = workflow.get_external_workflow_handle(valid.thread_id)
        try:
            await thread.signal(SIGNAL_QUEUE_MESSAGE, message)
        except FailureError as err:
            # Retrying cannot help: a closed thread stays closed (its id could only be
            # reused by a new thread, which should get its own schedule).
            raise ApplicationError(
                f"schedule {valid.schedule!r} cannot deliver to thread {valid.thread_id!r}:"
                f" the thread does not exist or is closed ({err.message})",
                type=THREAD_UNREACHABLE,
                non_retryable=True,
            ) from None
        return valid.thread_id
