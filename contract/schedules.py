"""What a weft schedule's delivery run carries (workflows/scheduled_delivery.py)."""

from __future__ import annotations

from pydantic import Field

from weft.contract.messages import QueuedMessage
from weft.contract.wire import CamelModel

SCHEDULED_DELIVERY_TYPE = "ScheduledDelivery"


class ScheduledDeliveryInput(CamelModel):
    """What one delivery sends: `message` to thread `thread_id`, on behalf of `schedule`."""

    thread_id: str = Field(min_length=1)
    schedule: str = Field(min_length=1)
    message: QueuedMessage
